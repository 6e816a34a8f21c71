#!/usr/bin/env python3
"""hf_tokenize: golden tokenizer data from HF transformers (the reference nb_tokenizer must match).

Run with the HF venv:  .venv-hf/bin/python verify/hf_tokenize.py \
    --texts tests/data/tokenizer_texts.json --out tests/data/tokenizer_golden_smollm2.json
Each text is encoded as tok(text)["input_ids"] (the model's own add_special_tokens default)
and with split_special_tokens=True, decoded back with and without special tokens, and rendered
as a single user chat turn (apply_chat_template, add_generation_prompt=True).
"""
import argparse
import datetime
import hashlib
import json
import os
import sys


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.path.join(root, "models"))
    ap.add_argument("--gguf", default="SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--texts", default=os.path.join(root, "tests/data/tokenizer_texts.json"))
    ap.add_argument("--out", default=os.path.join(root, "tests/data/tokenizer_golden_smollm2.json"))
    args = ap.parse_args()

    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        sys.exit(f"{args.texts}: expected a JSON list of strings")

    tok = AutoTokenizer.from_pretrained(args.models, gguf_file=args.gguf)
    cases, chat = [], []
    for text in texts:
        ids = tok(text)["input_ids"]
        cases.append({
            "text": text,
            "ids": ids,
            "decoded": tok.decode(ids),
            "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
            # special-token text left as ordinary text (nb parse_special=0)
            "ids_split_special": tok(text, split_special_tokens=True)["input_ids"],
        })
        msgs = [{"role": "user", "content": text}]
        rendered = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        chat_ids = tok(rendered, add_special_tokens=False)["input_ids"]
        tokenized = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        if hasattr(tokenized, "keys"):
            tokenized = tokenized["input_ids"]
        if list(tokenized) != chat_ids:
            sys.exit(f"apply_chat_template(tokenize=True) disagrees with tokenizing the "
                     f"rendering for {text!r}")
        chat.append({"message": text, "rendered": rendered, "ids": chat_ids})

    gguf_path = os.path.join(args.models, args.gguf)
    out = {
        "provenance": {
            "model": args.gguf,
            "model_sha256": sha256(gguf_path),
            "loader": f"AutoTokenizer.from_pretrained(models, gguf_file={args.gguf!r})",
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "python": sys.version.split()[0],
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "vocab_size": len(tok),
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.eos_token_id,
        },
        "cases": cases,
        "chat": chat,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{args.out}: {len(cases)} cases, {len(chat)} chat renderings")


if __name__ == "__main__":
    main()
