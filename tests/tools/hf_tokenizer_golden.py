#!/usr/bin/env python3
"""hf_tokenizer_golden: golden ids from HF transformers for any GGUF's tokenizer, over text files.

Run with the pinned HF venv (scripts/setup_hf.sh), e.g.
    nice -n 5 .venv-hf/bin/python tests/tools/hf_tokenizer_golden.py \
        --gguf models/gemma-3-270m-q4_k_m.gguf --out tests/data/tokenizer_golden_gemma3.json \
        tests/data/tokenizer_texts.json tests/data/tokenizer_texts_spm.json verify/prompts/*.txt
Each input is a JSON list of strings or a prompt file (verify/prompt_file.py's format). Every
text is encoded as tok(text)["input_ids"] (the model's own add_special_tokens default) and with
split_special_tokens=True, and decoded with and without special tokens. The decode cases are
token sequences the encoder never makes (cut characters in byte-fallback tokens, specials in
between), decoded by HF. Kept apart from verify/hf_tokenize.py, whose SmolLM2 output the
chat-template test reads.
"""
import argparse
import datetime
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "verify"))
from prompt_file import read_prompts  # noqa: E402

# Token spellings the decode cases are built from; cases whose tokens a vocabulary lacks are
# left out for that vocabulary.
DECODE_CASES = [
    ["<0xE4>", "<0xB8>", "<0xAD>"],             # one character in three byte tokens
    ["<0xE4>", "<0xB8>"],                       # a cut character: one U+FFFD per byte in HF
    ["\u2581Hello", "<0xE4>", "<0xB8>", "<0xAD>", "\u2581world"],
    ["<0x41>", "<0xFF>", "<0x42>"],             # an invalid byte inside a run
    ["<0xF0>", "<0x9F>", "<bos>", "<0x98>", "<0x80>"],  # a special token inside a run
    ["<bos>", "<start_of_turn>", "user", "\n", "Hi", "<end_of_turn>", "<eos>"],
    ["\u2581", "\u2581\u2581", "\u2581\u2581\u2581", "a", "\u2581"],
    ["<unused0>", "<pad>", "<mask>", "[multimodal]", "</div>"],
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_texts(path):
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            texts = json.load(f)
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            sys.exit(f"{path}: expected a JSON list of strings")
        return texts
    return read_prompts(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", required=True, help="the model file (its tokenizer is used)")
    ap.add_argument("--out", required=True)
    ap.add_argument("files", nargs="+", help="JSON lists of texts or prompt files")
    args = ap.parse_args()

    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    gguf = os.path.abspath(args.gguf)
    tok = AutoTokenizer.from_pretrained(os.path.dirname(gguf), gguf_file=os.path.basename(gguf))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cases = []
    for path in args.files:
        source = os.path.relpath(os.path.abspath(path), root)
        for text in read_texts(path):
            ids = tok(text)["input_ids"]
            cases.append({
                "source": source,
                "text": text,
                "ids": ids,
                "decoded": tok.decode(ids),
                "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
                "ids_split_special": tok(text, split_special_tokens=True)["input_ids"],
            })
    vocab = tok.get_vocab()
    decodes = []
    for spelled in DECODE_CASES:
        if not all(s in vocab for s in spelled):
            continue
        ids = [vocab[s] for s in spelled]
        decodes.append({"ids": ids, "decoded": tok.decode(ids),
                        "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    out = {
        "provenance": {
            "model": os.path.basename(gguf),
            "model_sha256": sha256(gguf),
            "loader": f"AutoTokenizer.from_pretrained(dir, gguf_file={os.path.basename(gguf)!r})",
            "tokenizer_class": type(tok).__name__,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "python": sys.version.split()[0],
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "files": [os.path.relpath(os.path.abspath(p), root) for p in args.files],
            "vocab_size": len(tok),
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.eos_token_id,
        },
        "cases": cases,
        "decode": decodes,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{args.out}: {len(cases)} cases, {len(decodes)} decode cases")


if __name__ == "__main__":
    main()
