#!/usr/bin/env bash
# Regenerates every committed HF bf16 reference trace in verify/references (make hf-reference):
# pinned venv, default model, then both prompt sets and the diagnosis prompt in one model load.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${NB_HF_VENV:-$ROOT/.venv-hf}"
MODEL="${NB_MODELS_DIR:-$ROOT/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
OUT_DIR="$ROOT/verify/references"
# Must match the C side's default diagnosis prompt; its sha256 names the diagnosis trace.
DIAG_PROMPT="${NB_DIAG_PROMPT:-The capital of France is}"

bash "$ROOT/scripts/setup_hf.sh"
bash "$ROOT/scripts/fetch_model.sh"

cd "$ROOT"
start=$(date +%s)
"$VENV/bin/python" verify/hf_reference.py --model "$MODEL" --out-dir "$OUT_DIR" \
    --n-tokens 32 --k 5 --threads "${NB_HF_THREADS:-2}" --hidden-steps "${NB_HF_HIDDEN_STEPS:-0}" \
    --prompts-file verify/prompts/instruct.txt \
    --prompts-file verify/prompts/base.txt \
    --hidden-states "$DIAG_PROMPT"
echo "hf_reference: traces regenerated in $(( $(date +%s) - start )) s"

# A prompts file that changed leaves its old trace behind under the old digest.
model16="$(sha256sum "$MODEL" | cut -c1-16)"
keep=(
    "$model16-$(sha256sum verify/prompts/instruct.txt | cut -c1-16).json"
    "$model16-$(sha256sum verify/prompts/base.txt | cut -c1-16).json"
    "$model16-diag-$(printf '%s' "$DIAG_PROMPT" | sha256sum | cut -c1-16).json"
)
for f in "$OUT_DIR"/"$model16"-*.json; do
    [ -e "$f" ] || continue
    case " ${keep[*]} " in
        *" $(basename "$f") "*) ;;
        *) echo "hf_reference: $f is no longer produced by this script (stale? git rm it)" >&2 ;;
    esac
done
