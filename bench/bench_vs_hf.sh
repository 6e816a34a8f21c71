#!/usr/bin/env bash
# bench_vs_hf.sh: npubench's CPU engine vs HF transformers (bf16) on the same prompts, same run.
# Prints TTFT and decode tokens/s for both and the ratios; needs scripts/setup_hf.sh's venv.
set -euo pipefail
cd "$(dirname "$0")/.."
N_TOKENS=${N_TOKENS:-32}
REPS=${REPS:-3}
THREADS=${THREADS:-2}
DTYPE=${DTYPE:-bf16}
NB=${NB:-build/npubench}
PROMPTS=verify/prompts/instruct.txt
[ -x .venv-hf/bin/python ] || scripts/setup_hf.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
grep -v '^\s*#' "$PROMPTS" | grep -v '^\s*$' | head -2 > "$tmp/prompts.txt"

# npubench: raw prompts (as verify feeds them), all n tokens, medians over prompts x reps.
: > "$tmp/nb.txt"
while IFS= read -r p; do
  "$NB" run --direct --no-chat --ignore-eos --dtype "$DTYPE" --threads "$THREADS" \
      --n-tokens "$N_TOKENS" --reps "$REPS" --prompt "$p" >"$tmp/run.txt" 2>&1 || "$NB" run \
      --no-chat --ignore-eos --dtype "$DTYPE" --threads "$THREADS" --n-tokens "$N_TOKENS" \
      --reps "$REPS" --prompt "$p" >"$tmp/run.txt"
  ttft=$(sed -n 's/^Time to first token (TTFT): [0-9.]*s (\([0-9.]*\) ms.*/\1/p' "$tmp/run.txt")
  tps=$(sed -n 's/^Tokens\/second: \([0-9.]*\).*/\1/p' "$tmp/run.txt")
  echo "$ttft $tps" >> "$tmp/nb.txt"
done < "$tmp/prompts.txt"

PYTHONUNBUFFERED=1 .venv-hf/bin/python verify/hf_reference.py --bench --prompts-file "$tmp/prompts.txt" \
    --n-tokens "$N_TOKENS" --reps "$REPS" --threads "$THREADS" > "$tmp/hf.json" 2>"$tmp/hf.log"

python3 - "$tmp/nb.txt" "$tmp/hf.json" "$DTYPE" "$THREADS" "$N_TOKENS" <<'PY'
import json, statistics, sys
nb = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
hf = json.load(open(sys.argv[2]))
nb_ttft = statistics.median(t for t, _ in nb)
nb_tps = statistics.median(s for _, s in nb)
print(f"SmolLM2-135M-Instruct, {sys.argv[4]} threads, {sys.argv[5]} tokens, first 2 instruct prompts (raw)")
print(f"| Metric | npubench ({sys.argv[3]}) | HF transformers (bf16) | ratio |")
print("|---|---|---|---|")
print(f"| TTFT ms (lower is better) | {nb_ttft:.1f} | {hf['ttft_ms']:.1f} | {hf['ttft_ms']/nb_ttft:.2f}x faster |")
print(f"| decode tokens/s | {nb_tps:.1f} | {hf['tps']:.1f} | {nb_tps/hf['tps']:.2f}x |")
PY
