#!/usr/bin/env bash
# Creates or updates .venv-hf, the pinned Python environment for the HF bf16 reference (verify/).
# Idempotent: when every pin is already installed it only checks versions and exits.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${NB_HF_VENV:-$ROOT/.venv-hf}"
PYTHON="${PYTHON:-python3}"

# The reference traces record these versions; changing a pin means regenerating the traces
# (scripts/hf_reference.sh). tokenizers decides the prompt ids, so it is pinned too; the other
# dependencies (torch's own nvidia-* wheels among them) are resolved by pip.
PINS=(
    "torch==2.15.0"
    "transformers==5.24.0"
    "gguf==0.19.0"
    "accelerate==1.16.0"
    "numpy==2.4.6"
    "tokenizers==0.23.3"
    "safetensors==0.8.0"
    "huggingface_hub==2.4.0"
)

# Exits 0 when the venv's interpreter runs and every pin matches exactly.
pins_satisfied() {
    [ -x "$VENV/bin/python" ] || return 1
    "$VENV/bin/python" - "${PINS[@]}" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        sys.exit(1)
    if have != want:
        sys.exit(1)
EOF
}

if pins_satisfied; then
    echo "setup_hf: $VENV up to date (${PINS[*]})"
    exit 0
fi

if ! "$VENV/bin/python" -c "" 2>/dev/null; then
    echo "setup_hf: creating $VENV with $("$PYTHON" --version 2>&1)"
    rm -rf "$VENV"
    if ! "$PYTHON" -m venv "$VENV"; then
        echo "setup_hf: '$PYTHON -m venv' failed; install python3-venv (apt-get install python3-venv)" >&2
        exit 1
    fi
fi

echo "setup_hf: installing ${PINS[*]} into $VENV"
"$VENV/bin/python" -m pip install --quiet "${PINS[@]}"

if ! pins_satisfied; then
    echo "setup_hf: $VENV still does not match the pins after install:" >&2
    "$VENV/bin/python" -m pip list 2>/dev/null | grep -Ei '^(torch|transformers|gguf|accelerate|numpy|tokenizers|safetensors|huggingface.hub) ' >&2 || true
    exit 1
fi
echo "setup_hf: done"
