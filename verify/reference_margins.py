#!/usr/bin/env python3
"""reference_margins: how far apart two references of one model are, in bf16 steps.

For every ordered pair of traces made for the same model and prompt set (the committed CPU
traces in verify/references/ and the H200 ones in verify/references-h200/), the first step of
each prompt where their greedy tokens differ, and there the first trace's margin between its
top-1 and the second's token, in bf16 steps at its top-1 logit (docs/numerics.md: the
near-tie band NB_GATE_NEAR_TIE_STEPS is derived from the largest of these).
Usage: verify/reference_margins.py [trace.json ...]   (default: both directories)
"""
import glob
import itertools
import json
import math
import os
import sys


def bf16_step(x):
    """The spacing of bf16 numbers at |x| (nb_gate_bf16_step)."""
    a = abs(x)
    if not (a >= 2.0 ** -126) or math.isinf(a):
        return 2.0 ** -133
    return 2.0 ** (math.floor(math.log2(a)) - 7)


def main(paths):
    here = os.path.dirname(os.path.abspath(__file__))
    if not paths:
        paths = sorted(glob.glob(os.path.join(here, "references", "*.json")) +
                       glob.glob(os.path.join(here, "references-h200", "*.json")))
    traces = {}
    for p in paths:
        d = json.load(open(p))
        pv = d["provenance"]
        key = (pv["model_sha256"], pv.get("prompts_sha256", pv.get("prompt_sha256", "")))
        name = os.path.relpath(p, here)
        traces.setdefault(key, []).append((name, d))
    worst_bf16 = 0.0
    for group in traces.values():
        for (an, a), (bn, b) in itertools.permutations(group, 2):
            div = 0
            worst = 0.0
            for pa, pb in zip(a["prompts"], b["prompts"]):
                for x, y in zip(pa["steps"], pb["steps"]):
                    if x["token"] == y["token"]:
                        continue
                    div += 1
                    ids, lg = x["topk_ids"], x["topk_logits"]
                    st = math.inf
                    if y["token"] in ids:
                        st = (lg[0] - lg[ids.index(y["token"])]) / bf16_step(lg[0])
                    worst = max(worst, st)
                    break
            dt = a["provenance"].get("dtype", "bfloat16")
            print(f"{an:52s} vs {bn:52s} {div:2d}/{len(a['prompts'])} diverge, "
                  f"largest margin {worst:.2f} steps ({dt} reference)")
            if dt == "bfloat16":
                worst_bf16 = max(worst_bf16, worst)
    print(f"largest margin with a bf16 reference: {worst_bf16:.2f} bf16 steps at its top-1")


if __name__ == "__main__":
    main(sys.argv[1:])
