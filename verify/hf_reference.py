"""HF transformers bf16 reference for npubench's verify gate: greedy top-k traces, per-layer
hidden-state traces and a TTFT/TPS benchmark, written as the JSON the C side reads (verify/)."""

import argparse
import base64
import datetime
import hashlib
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from prompt_file import PromptFileError, read_prompts

os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF loader's progress bars, before tqdm loads
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
TRACE_FORMAT = "npubench-hf-trace/1"
DIGEST_PREFIX = 16  # hex digits of each digest in a default trace file name


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def model_digest(path):
    """sha256 of a model file; for an HF directory, of its sha256sum-style manifest
    ("<hex>  <relative path>\\n" per file, sorted), so any changed file changes it."""
    if os.path.isfile(path):
        return sha256_file(path)
    lines = []
    for dirpath, _, files in os.walk(path):
        for name in files:
            full = os.path.join(dirpath, name)
            lines.append(f"{sha256_file(full)}  {os.path.relpath(full, path)}\n")
    return hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()


def display_path(path):
    """Repo-relative when inside the repo, so traces do not depend on the checkout location."""
    full = os.path.abspath(path)
    if os.path.commonpath([full, ROOT]) == ROOT:
        return os.path.relpath(full, ROOT)
    return full


def load_model(path):
    """A GGUF file (dequantized by transformers' GGUF loader) or an HF directory, in bf16 on CPU."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    # The GGUF loader warns that packed weights are faster in f32; for Llama it takes the
    # dequantizing path anyway, which the dtype check below confirms.
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if os.path.isfile(path):
        where, extra = os.path.dirname(os.path.abspath(path)), {"gguf_file": os.path.basename(path)}
    else:
        where, extra = path, {}
    tokenizer = AutoTokenizer.from_pretrained(where, **extra)
    model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.bfloat16, **extra)
    model.eval()
    wrong = [n for n, p in model.named_parameters() if p.dtype != torch.bfloat16]
    if wrong:
        sys.exit(f"{path}: parameters not in bfloat16 after loading (e.g. {wrong[0]}, "
                 f"{len(wrong)} in all); this would not be a bf16 reference")
    return tokenizer, model


def prompt_ids(tokenizer, text, chat):
    """Raw prompt ids (no template, no padding); with chat, the model's template for one user turn."""
    if not chat:
        return list(tokenizer(text)["input_ids"])
    ids = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                        add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def topk_stable(logits, k):
    """Top-k ids by logit descending, ties to the smaller id, as (ids, f32 logits).

    torch.topk does not promise an order among equal values, and bf16 logits tie often, so the
    order is made explicit: a stable sort of the negated logits keeps equal ones in id order."""
    x = logits.float().numpy()
    if np.isnan(x).any():
        raise ValueError("logits contain NaN")
    order = np.argsort(-x, kind="stable")[:k]
    return [int(i) for i in order], [float(x[i]) for i in order]


def greedy_trace(model, ids, n_tokens, k):
    """Greedy decode n_tokens steps with a KV cache, recording each step's top-k; no EOS stop."""
    steps = []
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
        for i in range(n_tokens):
            topk_ids, topk_logits = topk_stable(out.logits[0, -1], k)
            token = topk_ids[0]
            steps.append({"token": token, "topk_ids": topk_ids, "topk_logits": topk_logits})
            if i + 1 < n_tokens:
                out = model(input_ids=torch.tensor([[token]]), cache=out.cache,
                            use_cache=True, logits_to_keep=1)
    return steps


def bf16_b64(rows):
    """bf16 rows as little-endian base64: HF's own activations are bf16, so this is lossless."""
    raw = rows.detach().to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype("<i2")
    return base64.b64encode(raw.tobytes()).decode("ascii")


def step_states(model, ids, steps, at_steps):
    """Per-layer hidden states at the positions that produce the chosen steps' logits.

    Step s is produced at position len(ids)-1+s from the prompt plus the first s chosen tokens;
    one cache-free forward over the longest such input gives every requested position (causal).
    For each position: "attn", the residual stream after each layer's attention block (the
    input of the norm in front of the MLP: post_attention_layernorm in Llama, but
    pre_feedforward_layernorm in Gemma 3, whose post_attention_layernorm normalizes the
    attention output before the residual add), "mlp", each layer's output, and "final_norm", the last
    layer's output after the final norm, each bf16 [n_layers][dim] (final_norm: [dim])."""
    at_steps = sorted(s for s in set(at_steps) if 0 <= s < len(steps))
    if not at_steps:
        return None
    inner = model.model
    layers = inner.layers
    full = list(ids) + [st["token"] for st in steps[: at_steps[-1]]]
    captured = {"attn": [None] * len(layers), "mlp": [None] * len(layers), "final": None}
    hooks = []

    def attn_hook(i):
        def hook(_module, args):
            captured["attn"][i] = args[0][0]
        return hook

    def mlp_hook(i):
        def hook(_module, _args, output):
            captured["mlp"][i] = (output[0] if isinstance(output, tuple) else output)[0]
        return hook

    def final_hook(_module, _args, output):
        captured["final"] = output[0]

    for i, layer in enumerate(layers):
        pre_mlp = getattr(layer, "pre_feedforward_layernorm", None) or layer.post_attention_layernorm
        hooks.append(pre_mlp.register_forward_pre_hook(attn_hook(i)))
        hooks.append(layer.register_forward_hook(mlp_hook(i)))
    hooks.append(inner.norm.register_forward_hook(final_hook))
    try:
        with torch.no_grad():
            model(input_ids=torch.tensor([full]), use_cache=False, logits_to_keep=1)
    finally:
        for h in hooks:
            h.remove()
    positions = []
    for s in at_steps:
        pos = len(ids) - 1 + s
        positions.append({"step": s,
                          "attn": bf16_b64(torch.stack([a[pos] for a in captured["attn"]])),
                          "mlp": bf16_b64(torch.stack([m[pos] for m in captured["mlp"]])),
                          "final_norm": bf16_b64(captured["final"][pos])})
    return {"encoding": "bf16le-base64", "n_layers": len(layers),
            "dim": model.config.hidden_size, "positions": positions}


def hidden_states_trace(model, ids, k):
    """Per-layer outputs at every prompt position for one prefill, plus the final top-k.

    HF's hidden_states[0] is the embedding and [l+1] the output of block l, except that the last
    entry is taken after the final RMSNorm; that layer is marked post_norm."""
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), use_cache=False, output_hidden_states=True,
                    logits_to_keep=1)
    n_layers = model.config.num_hidden_layers
    hs = out.hidden_states
    if len(hs) != n_layers + 1:
        sys.exit(f"expected {n_layers + 1} hidden states, got {len(hs)}")
    layers = []
    for layer in range(n_layers):
        data = hs[layer + 1][0].float().numpy().astype("<f4", copy=False)
        layers.append({"layer": layer, "post_norm": layer == n_layers - 1,
                       "data": base64.b64encode(np.ascontiguousarray(data).tobytes()).decode("ascii")})
    topk_ids, topk_logits = topk_stable(out.logits[0, -1], k)
    return {"n_layers": n_layers, "dim": model.config.hidden_size, "n_pos": len(ids),
            "encoding": "f32le-base64", "layers": layers,
            "final_topk_ids": topk_ids, "final_topk_logits": topk_logits}


# The ISA features that decide which bf16/fp32 kernels torch's CPU backend runs, and with
# them the last bits of every logit: two CPUs that differ here make different references.
NUMERIC_CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw",
                     "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile",
                     "amx_bf16", "amx_int8", "asimd", "asimdhp", "bf16", "i8mm", "sve", "sve2")


def cpu_provenance():
    """The CPU this reference is made on: model name, the numerics-relevant flags, and the
    kernel set torch dispatches to (docs/numerics.md: references differ across CPUs)."""
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model") and not model:
                    model = value.strip()
                elif key in ("flags", "Features"):
                    flags.update(value.split())
    except OSError:
        pass
    return {"model": model or platform.processor() or platform.machine(),
            "flags": [f for f in NUMERIC_CPU_FLAGS if f in flags],
            "torch_capability": torch.backends.cpu.get_cpu_capability()}


def provenance(args, model, model_sha):
    from importlib.metadata import version

    return {"tool": "verify/hf_reference.py", "model_file": os.path.basename(os.path.normpath(args.model)),
            "model_sha256": model_sha, "transformers": version("transformers"),
            "torch": version("torch"), "gguf": version("gguf"), "dtype": "bfloat16",
            "attn_implementation": model.config._attn_implementation, "device": "cpu",
            "threads": torch.get_num_threads(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            .replace("+00:00", "Z"),
            "python": platform.python_version(), "cpu": cpu_provenance()}


def _scalar(v):
    return not isinstance(v, (dict, list))


def _inline(v):
    """Scalars, lists of scalars, and record-like objects (scalars plus scalar lists: a step)."""
    if isinstance(v, list):
        return all(_scalar(x) for x in v)
    if isinstance(v, dict):
        values = v.values()
        return not v or (all(_scalar(x) or _inline(x) and isinstance(x, list) for x in values)
                         and any(isinstance(x, list) for x in values))
    return True


def to_json(value, indent=0):
    """JSON with one line per step-like record or scalar list, so traces stay readable and diffable."""
    pad, inner = " " * indent, " " * (indent + 1)
    if _inline(value):
        return pad + json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = [f"{inner}{json.dumps(key)}: {to_json(v, indent + 1).lstrip()}" for key, v in value.items()]
        return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
    return pad + "[\n" + ",\n".join(to_json(v, indent + 1) for v in value) + "\n" + pad + "]"


def write_trace(trace, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(to_json(trace) + "\n")
    os.replace(tmp, path)
    print(f"hf_reference: wrote {path}", file=sys.stderr)


def run_verify(args, prompts_file, tokenizer, model, model_sha):
    all_prompts = read_prompts(prompts_file)
    prompts = all_prompts[: args.max_prompts]
    if not prompts:
        sys.exit(f"{prompts_file}: no prompts (blank and '#' lines are skipped)")
    prompts_sha = sha256_file(prompts_file)
    prov = provenance(args, model, model_sha)
    prov.update({"prompts_file": display_path(prompts_file), "prompts_sha256": prompts_sha})
    records = []
    for index, text in enumerate(prompts):
        t0 = time.perf_counter()
        ids = prompt_ids(tokenizer, text, args.chat)
        steps = greedy_trace(model, ids, args.n_tokens, args.k)
        text_out = tokenizer.decode([s["token"] for s in steps], skip_special_tokens=False)
        record = {"index": index, "text": text, "prompt_ids": ids, "steps": steps,
                  "text_out": text_out}
        # After the trace, from a separate forward pass: the gate data cannot depend on it.
        states = step_states(model, ids, steps, args.hidden_steps)
        if states:
            record["hidden"] = states
        records.append(record)
        print(f"hf_reference: prompt {index} ({len(ids)} ids) {time.perf_counter() - t0:.1f} s: "
              f"{text!r} -> {text_out!r}", file=sys.stderr)
    trace = {"format": TRACE_FORMAT, "provenance": prov, "n_tokens": args.n_tokens, "k": args.k,
             "chat": args.chat, "prompts": records, "hidden_states": None}
    # A partial trace must never take the name the C side looks up for the whole file.
    suffix = ("-chat" if args.chat else "") + (f"-first{len(prompts)}"
                                               if len(prompts) < len(all_prompts) else "")
    name = f"{model_sha[:DIGEST_PREFIX]}-{prompts_sha[:DIGEST_PREFIX]}{suffix}.json"
    write_trace(trace, args.out or os.path.join(args.out_dir, name))


def run_add_hidden(args, model, model_sha):
    """Adds (or replaces) the per-prompt hidden states of existing verify traces in place.

    Only step_states runs, from each record's own prompt ids and chosen tokens, so the gate
    data (ids, tokens, top-k) are carried over unchanged and cost no greedy decode."""
    for path in args.add_hidden:
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
        if trace.get("provenance", {}).get("model_sha256") != model_sha:
            sys.exit(f"{path}: made for another model than {args.model}")
        for record in trace["prompts"]:
            t0 = time.perf_counter()
            record.pop("hidden", None)
            states = step_states(model, record["prompt_ids"], record["steps"], args.hidden_steps)
            if states:
                record["hidden"] = states
            print(f"hf_reference: {path} prompt {record['index']} hidden states "
                  f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
        trace["provenance"]["hidden_states_added"] = provenance(args, model, model_sha)["date"]
        write_trace(trace, path)


def run_hidden_states(args, tokenizer, model, model_sha):
    text = args.hidden_states
    prompt_sha = hashlib.sha256(text.encode("utf-8")).hexdigest()
    prov = provenance(args, model, model_sha)
    prov["prompt_sha256"] = prompt_sha
    ids = prompt_ids(tokenizer, text, args.chat)
    hidden = {"prompt": text, "prompt_ids": ids}
    hidden.update(hidden_states_trace(model, ids, args.k))
    trace = {"format": TRACE_FORMAT, "provenance": prov, "n_tokens": 0, "k": args.k,
             "chat": args.chat, "prompts": [], "hidden_states": hidden}
    suffix = "-chat" if args.chat else ""
    name = f"{model_sha[:DIGEST_PREFIX]}-diag-{prompt_sha[:DIGEST_PREFIX]}{suffix}.json"
    write_trace(trace, args.out or os.path.join(args.out_dir, name))


def run_bench(args, tokenizer, model):
    """TTFT = tokenize + prefill + first greedy token; TPS = the remaining n_tokens-1 decode
    steps per second. One warm-up run per prompt, then --reps timed runs; medians reported.
    Greedy here is a plain argmax, so the timing carries no trace bookkeeping."""
    prompts = read_prompts(args.prompts_file[0])[: args.max_prompts]
    if not prompts or args.n_tokens < 2:
        sys.exit("bench needs at least one prompt and --n-tokens >= 2")
    samples = []
    with torch.no_grad():
        for index, text in enumerate(prompts):
            for rep in range(-1, args.reps):
                t0 = time.perf_counter()
                ids = prompt_ids(tokenizer, text, args.chat)
                out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
                token = int(torch.argmax(out.logits[0, -1]))
                t1 = time.perf_counter()
                for _ in range(args.n_tokens - 1):
                    out = model(input_ids=torch.tensor([[token]]), cache=out.cache,
                                use_cache=True, logits_to_keep=1)
                    token = int(torch.argmax(out.logits[0, -1]))
                t2 = time.perf_counter()
                if rep >= 0:
                    samples.append({"prompt": index, "rep": rep, "n_prompt_ids": len(ids),
                                    "ttft_ms": (t1 - t0) * 1e3,
                                    "tps": (args.n_tokens - 1) / (t2 - t1)})
    result = {"ttft_ms": statistics.median(s["ttft_ms"] for s in samples),
              "tps": statistics.median(s["tps"] for s in samples),
              # best cases too: on a shared machine the medians carry other jobs' load
              "ttft_ms_min": min(s["ttft_ms"] for s in samples),
              "tps_max": max(s["tps"] for s in samples),
              "n_tokens": args.n_tokens, "threads": torch.get_num_threads(), "samples": samples}
    print(json.dumps(result, indent=1))


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=DEFAULT_MODEL, help="GGUF file or HF model directory")
    p.add_argument("--prompts-file", action="append", default=[],
                   help="one prompt per line, '#' and blank lines skipped; repeat for one trace "
                        "per file from a single model load")
    p.add_argument("--out", help="trace path (default: a digest-named file in --out-dir)")
    p.add_argument("--out-dir", help="e.g. verify/references; names the trace by digests")
    p.add_argument("--n-tokens", type=int, default=32)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--max-prompts", type=int, default=None)
    p.add_argument("--hidden-states", metavar="PROMPT", help="write a per-layer diagnosis trace")
    p.add_argument("--hidden-steps", default="0",
                   help="comma-separated steps at whose positions each verify prompt keeps "
                        "per-layer hidden states for localization ('' for none; default 0)")
    p.add_argument("--add-hidden", action="append", default=[], metavar="TRACE",
                   help="add --hidden-steps states to an existing verify trace in place, "
                        "leaving its gate data as they are (repeatable)")
    p.add_argument("--chat", action="store_true", help="wrap prompts in the chat template")
    p.add_argument("--bench", action="store_true", help="time TTFT and decode TPS, print JSON")
    p.add_argument("--reps", type=int, default=3, help="timed runs per prompt for --bench")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    try:
        args.hidden_steps = [int(x) for x in args.hidden_steps.split(",") if x.strip()]
    except ValueError:
        p.error(f"--hidden-steps {args.hidden_steps!r}: expected comma-separated step numbers")
    if any(s < 0 for s in args.hidden_steps):
        p.error("--hidden-steps: steps are 0 or more")
    if args.n_tokens < 1 or args.k < 1 or args.reps < 1:
        p.error("--n-tokens, --k and --reps must be at least 1")
    if args.max_prompts is not None and args.max_prompts < 1:
        p.error("--max-prompts must be at least 1")
    if args.hidden_states is None and not args.prompts_file and not args.add_hidden:
        p.error("--prompts-file is needed unless --hidden-states or --add-hidden is given")
    for path in args.add_hidden:
        if not os.path.isfile(path):
            p.error(f"{path}: no such trace")
    if args.bench and (args.hidden_states is not None or len(args.prompts_file) != 1):
        p.error("--bench takes one --prompts-file and no --hidden-states")
    n_traces = len(args.prompts_file) + (args.hidden_states is not None)
    if not args.bench and not (args.out or args.out_dir) and n_traces:
        p.error("give --out or --out-dir")
    if args.out and n_traces > 1:
        p.error("--out names one trace; use --out-dir for several")
    for path in args.prompts_file:
        if not os.path.isfile(path):
            p.error(f"{path}: no such prompts file")
        try:  # before the model loads: a bad file costs nothing
            read_prompts(path)
        except PromptFileError as e:
            p.error(str(e))
    if not os.path.exists(args.model):
        p.error(f"{args.model}: no such model file or directory (scripts/fetch_model.sh fetches it)")
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    t0 = time.perf_counter()
    tokenizer, model = load_model(args.model)
    print(f"hf_reference: loaded {args.model} in {time.perf_counter() - t0:.1f} s "
          f"(attention {model.config._attn_implementation}, {args.threads} threads)", file=sys.stderr)
    if args.bench:
        run_bench(args, tokenizer, model)
        return
    model_sha = model_digest(args.model)
    t0 = time.perf_counter()
    for prompts_file in args.prompts_file:
        run_verify(args, prompts_file, tokenizer, model, model_sha)
    if args.add_hidden:
        run_add_hidden(args, model, model_sha)
    if args.hidden_states is not None:
        run_hidden_states(args, tokenizer, model, model_sha)
    print(f"hf_reference: generated in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
