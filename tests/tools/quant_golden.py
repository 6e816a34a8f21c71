#!/usr/bin/env python3
# quant_golden: writes tests/data/quant_golden_gemma3.txt, a few real blocks of each quantized
# type in the Gemma 3 GGUF with gguf-py's dequantization of them, the independent reference
# test_dequant checks nb_quant against. Run with the pinned HF env (scripts/setup_hf.sh):
#   $NB_HF_VENV/bin/python tests/tools/quant_golden.py models/gemma-3-270m-q4_k_m.gguf
import hashlib
from importlib.metadata import version
import struct
import sys

import numpy as np
import gguf
from gguf import quants

# (type, tensor): the first tensor of each type in the file; rows/blocks: first, middle, last.
PICKS = [
    ("Q5_0", "blk.0.attn_q.weight"),
    ("Q4_K", "blk.0.attn_output.weight"),
    ("Q6_K", "blk.0.ffn_down.weight"),
    ("Q8_0", "blk.0.attn_v.weight"),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/quant_golden_gemma3.txt"
    r = gguf.GGUFReader(path)
    by_name = {t.name: t for t in r.tensors}
    lines = [
        "# npubench-quant-golden/1: raw blocks of %s (sha256 %s)" % (path.split("/")[-1], sha256(path)),
        "# and their float32 values from gguf-py %s (gguf.quants.dequantize), written by" % version("gguf"),
        "# tests/tools/quant_golden.py. block TYPE TENSOR ROW BLOCK; raw: the block's bytes;",
        "# f32: each value's IEEE bits.",
    ]
    for tname, name in PICKS:
        t = by_name[name]
        qt = t.tensor_type
        assert qt.name == tname, (name, qt.name)
        block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qt]
        cols = int(t.shape[0])
        rows = int(np.prod(t.shape[1:]))
        per_row = cols // block_elems
        raw = np.asarray(t.data).reshape(-1).view(np.uint8)
        for row, blk in ((0, 0), (rows // 2, per_row // 2), (rows - 1, per_row - 1)):
            off = (row * per_row + blk) * block_bytes
            b = raw[off:off + block_bytes]
            vals = quants.dequantize(b.reshape(1, block_bytes), qt).reshape(-1).astype(np.float32)
            lines.append("block %s %s %d %d" % (tname, name, row, blk))
            lines.append("raw " + bytes(b).hex())
            lines.append("f32 " + " ".join("%08x" % struct.unpack("<I", struct.pack("<f", v))[0]
                                           for v in vals))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
