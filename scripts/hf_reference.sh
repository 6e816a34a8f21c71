#!/usr/bin/env bash
# Regenerates every committed HF bf16 reference trace in verify/references (make hf-reference):
# pinned venv; SmolLM2 with both its prompt sets, then Gemma 3 with its own, each with the
# diagnosis prompt, one model load each. NB_HF_MODELS="smollm2 gemma3" (default) picks which.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${NB_HF_VENV:-$ROOT/.venv-hf}"
MODELS="${NB_MODELS_DIR:-$ROOT/models}"
OUT_DIR="$ROOT/verify/references"
# Must match the C side's default diagnosis prompt; its sha256 names the diagnosis trace.
DIAG_PROMPT="${NB_DIAG_PROMPT:-The capital of France is}"

bash "$ROOT/scripts/setup_hf.sh"
bash "$ROOT/scripts/fetch_model.sh"

cd "$ROOT"

# one MODEL PROMPT_FILE...: traces for each prompt file and the diagnosis prompt, then a note
# for any trace of this model the run did not produce (a prompts file that changed).
one() {
    local model="$1" start model16 keep=() p f
    shift
    local args=()
    for p in "$@"; do args+=(--prompts-file "$p"); done
    start=$(date +%s)
    "$VENV/bin/python" verify/hf_reference.py --model "$model" --out-dir "$OUT_DIR" \
        --n-tokens 32 --k 5 --threads "${NB_HF_THREADS:-2}" \
        --hidden-steps "${NB_HF_HIDDEN_STEPS:-0}" "${args[@]}" \
        --hidden-states "$DIAG_PROMPT"
    echo "hf_reference: $(basename "$model") traces regenerated in $(( $(date +%s) - start )) s"
    model16="$(sha256sum "$model" | cut -c1-16)"
    for p in "$@"; do keep+=("$model16-$(sha256sum "$p" | cut -c1-16).json"); done
    keep+=("$model16-diag-$(printf '%s' "$DIAG_PROMPT" | sha256sum | cut -c1-16).json")
    for f in "$OUT_DIR"/"$model16"-*.json; do
        [ -e "$f" ] || continue
        case " ${keep[*]} " in
            *" $(basename "$f") "*) ;;
            *) echo "hf_reference: $f is no longer produced by this script (stale? git rm it)" >&2 ;;
        esac
    done
}

for m in ${NB_HF_MODELS:-smollm2 gemma3}; do
    case "$m" in
        smollm2) one "$MODELS/SmolLM2-135M-Instruct.Q4_1.gguf" verify/prompts/instruct.txt \
                     verify/prompts/base.txt ;;
        gemma3) one "$MODELS/gemma-3-270m-q4_k_m.gguf" verify/prompts/gemma3.txt ;;
        *) echo "hf_reference: unknown model '$m' (smollm2, gemma3)" >&2; exit 2 ;;
    esac
done
