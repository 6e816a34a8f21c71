#!/usr/bin/env bash
# bench_tokenizer_vs_hf.sh: our tokenizer vs HF's (transformers from the same GGUF, Rust
# tokenizers underneath) on the same texts, same run: load time, encode time of every text
# one by one and of all of them joined; prints both and the ratios (HF / ours: above 1, we are
# faster). Then the ids themselves: `npubench tokenize --ids` against HF's input_ids, text by
# text (any difference fails, naming the text and both id lists; counts alone can agree while
# the ids do not). Needs scripts/setup_hf.sh's venv (NB_HF_VENV to use another).
#   bench/bench_tokenizer_vs_hf.sh [MODEL.gguf] [TEXTS.json...]
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${1:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
shift || true
TEXTS=("$@")
[ ${#TEXTS[@]} -gt 0 ] || TEXTS=(tests/data/tokenizer_texts.json tests/data/tokenizer_texts_spm.json)
VENV=${NB_HF_VENV:-.venv-hf}
BENCH=${BENCH:-build/bench/bench_tokenizer}
NPUBENCH=${NPUBENCH:-build/npubench}
[ -x "$VENV/bin/python" ] || scripts/setup_hf.sh
nb=$("$BENCH" "$MODEL" "${TEXTS[@]}")
echo "$nb"
hf=$("$VENV/bin/python" - "$MODEL" "${TEXTS[@]}" <<'PY'
import json, os, sys, time
from transformers import AutoTokenizer
model, files = sys.argv[1], sys.argv[2:]
t0 = time.perf_counter()
tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(model)),
                                    gguf_file=os.path.basename(model))
load = (time.perf_counter() - t0) * 1000
texts = [t for f in files for t in json.load(open(f, encoding="utf-8")) if isinstance(t, str)]
joined = "".join(t + "\n" for t in texts)
rust = tok.backend_tokenizer
def best(items, enc):
    b, n = 1e30, 0
    for _ in range(7):
        t0 = time.perf_counter()
        n = sum(len(enc(x)) for x in items)
        b = min(b, (time.perf_counter() - t0) * 1000)
    return b, n
# as users call it (transformers' Python wrapper), and the Rust tokenizer alone
for name, enc in (("hf", lambda x: tok(x)["input_ids"]), ("hf_rust", lambda x: rust.encode(x).ids)):
    each, ne = best(texts, enc)
    whole, nw = best([joined], enc)
    print(f"{name} load_ms {load:.1f} texts {len(texts)} tokens {ne} encode_ms {each:.3f} "
          f"joined_bytes {len(joined.encode())} joined_tokens {nw} joined_ms {whole:.3f}")
PY
)
echo "$hf"
# the ids, text by text: ours as `npubench tokenize` prints them, HF's as users get them
for f in "${TEXTS[@]}"; do
  ours=$("$NPUBENCH" tokenize --model "$MODEL" --texts-json "$f" --ids)
  theirs=$("$VENV/bin/python" - "$MODEL" "$f" <<'PY'
import json, os, sys
from transformers import AutoTokenizer
model, f = sys.argv[1], sys.argv[2]
tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(model)),
                                    gguf_file=os.path.basename(model))
for t in json.load(open(f, encoding="utf-8")):
    if isinstance(t, str):
        print(" ".join(str(i) for i in tok(t)["input_ids"]))
PY
)
  if [ "$ours" != "$theirs" ]; then
    diff <(echo "$ours") <(echo "$theirs") | head -5
    n=$(diff <(echo "$ours") <(echo "$theirs") | grep -c '^<' || true)
    echo "ids differ from HF's on $n text(s) of $f (first lines above: < npubench, > hf)"
    exit 1
  fi
  echo "ids: $(echo "$ours" | wc -l) texts of $f, every id equal to HF's"
done
field() { echo "$1" | tr ' ' '\n' | sed -n "/^$2\$/{n;p;}"; }
while read -r peer; do
  line=$(echo "$hf" | grep "^$peer ")
  for f in load_ms encode_ms joined_ms; do
    [ "$peer" = hf_rust ] && [ $f = load_ms ] && continue
    awk -v a="$(field "$line" $f)" -v b="$(field "$nb" $f)" -v f=$f -v p=$peer \
        'BEGIN { printf "%s: %s/npubench %.1fx\n", f, p, a / b }'
  done
done <<< "hf
hf_rust"
