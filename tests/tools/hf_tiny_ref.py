#!/usr/bin/env python3
"""hf_tiny_ref: tiny random Llama and Gemma 3 models built with transformers, saved as an HF
directory and as GGUF, with HF float32 references of every layer's hidden state and the logits.

Run with the pinned HF venv (scripts/setup_hf.sh; no network):
    nice -n 5 .venv-hf/bin/python tests/tools/hf_tiny_ref.py [--out tests/data/tiny_hf]
It writes, per model (llama, gemma3): <model>/ (config.json, model.safetensors), <model>.gguf
and <model>-ref.json. This is the independent reference of test_engine_hf: the forward pass is
transformers' own (eager attention, float32), not a formula written beside the engine.

Weights are random but bf16-exact (rounded to bf16 and back), so the HF directory stores them
as bf16 without loss, the GGUF stores matrices as BF16 (llama.cpp's convert --outtype bf16) and
the float32 references are of exactly those values. The GGUF follows llama.cpp's
convert_hf_to_gguf: tensor names, Q/K rows permuted for Llama (GGML's rope pairs neighbours),
Gemma norms stored as 1 + w, 1-D tensors in F32, a tied Gemma head. One departure: convert
writes llama3 RoPE scaling as a rope_freqs.weight tensor, which our loader refuses; the file
carries the same parameters as llama.rope.scaling.* metadata, which it reads.

The reference JSON holds the prompt, the decode tokens, per step the hidden states HF returns
(hidden_states[1..L]: each layer's output, the last after the final norm) and the logits of
the last position, and bf16_rel_err: how far HF's own bf16 run is from its float32 one (largest
|difference| over the largest |value|, for hidden states and for logits), from which the test
derives its bf16 bound.
"""
import argparse
import functools
import json
import os

import numpy as np


def bf16_exact(model, torch, seed, norm_center):
    """Random weights, rounded to bf16: matrices ~ N(0, 1/fan_in), embeddings ~ N(0, 1),
    norm weights norm_center + N(0, 0.2)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                v = norm_center + 0.2 * torch.randn(p.shape, generator=g)
            elif "embed" in name:
                v = torch.randn(p.shape, generator=g)
            else:
                v = torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def run(model, torch, prompt, decode):
    """Per step: hidden_states[1..] of the step's positions and the last position's logits."""
    steps = []
    with torch.no_grad():
        out = model(torch.tensor([prompt]), output_hidden_states=True, use_cache=True)
        past = out.past_key_values
        steps.append({"hidden": [h[0].float().tolist() for h in out.hidden_states[1:]],
                      "logits": out.logits[0, -1].float().tolist()})
        for i, tok in enumerate(decode):
            pos = len(prompt) + i
            out = model(torch.tensor([[tok]]), past_key_values=past, use_cache=True,
                        output_hidden_states=True, position_ids=torch.tensor([[pos]]))
            past = out.past_key_values
            steps.append({"hidden": [h[0].float().tolist() for h in out.hidden_states[1:]],
                          "logits": out.logits[0, -1].float().tolist()})
    return steps


def rel_err(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def rounded(x):
    """Lists of floats written with 9 significant digits (float32 round-trips)."""
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return float(f"{x:.9g}")


def references(model, torch, hf_dir, prompt, decode, meta):
    """float32 run of the model as built; bf16 run of the saved directory loaded in bf16, as
    verify/hf_reference.py loads a model (converting this one in place would also round its
    rope inverse frequencies, which HF keeps in float32). hf_dir None: saved to a temporary
    directory for that run only."""
    import tempfile
    from transformers import AutoModelForCausalLM
    model.set_attn_implementation("eager")
    f32 = run(model, torch, prompt, decode)
    tmp = None
    if hf_dir is None:
        tmp = tempfile.TemporaryDirectory()
        hf_dir = tmp.name
        save_hf(model, torch, hf_dir)
    b16m = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.bfloat16).eval()
    b16m.set_attn_implementation("eager")
    b16 = run(b16m, torch, prompt, decode)
    eh = max(rel_err(b["hidden"][l], f["hidden"][l])
             for f, b in zip(f32, b16) for l in range(len(f["hidden"])))
    el = max(rel_err(b["logits"], f["logits"]) for f, b in zip(f32, b16))
    return dict(meta, prompt=prompt, decode=decode,
                bf16_rel_err={"hidden": eh, "logits": el},
                steps=[{"hidden": rounded(s["hidden"]), "logits": rounded(s["logits"])}
                       for s in f32])


def np32(t):
    return t.detach().to("cpu").float().numpy()


def llama_permute(w, n_head):
    """HF's rotate-half row order to GGML's neighbour pairs, per head (convert's permute)."""
    rows = w.shape[0]
    return (w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2)
            .reshape(w.shape))


def put(gw, gguf, name, w, q4_1=False):
    """1-D tensors in F32 (as convert keeps them); matrices in BF16, or Q4_1 blocks."""
    Q = gguf.GGMLQuantizationType
    if w.ndim == 1:
        gw.add_tensor(name, w.astype(np.float32), raw_dtype=Q.F32)
    elif q4_1:
        gw.add_tensor(name, gguf.quants.quantize(w.astype(np.float32), Q.Q4_1), raw_dtype=Q.Q4_1)
    else:
        gw.add_tensor(name, to_bf16_bits(w), raw_shape=w.shape, raw_dtype=Q.BF16)


def q4_1_model(model, torch, gguf):
    """A copy of the model whose matrices hold what their Q4_1 blocks dequantize to (gguf-py's
    own quantizer and dequantizer: independent of our nb_quant). Rows are quantized one by one,
    so permuting rows for the GGUF commutes with this."""
    import copy
    Q = gguf.GGMLQuantizationType.Q4_1
    m = copy.deepcopy(model)
    with torch.no_grad():
        for _, p in m.named_parameters():
            if p.dim() == 2:
                w = np32(p)
                p.copy_(torch.from_numpy(gguf.quants.dequantize(gguf.quants.quantize(w, Q), Q)
                                         .reshape(w.shape)))
    return m


def to_bf16_bits(w):
    """float32 values (bf16-exact) as their upper 16 bits."""
    return (np.ascontiguousarray(w, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def write_llama_gguf(model, cfg, rope, path, gguf, q4_1=False):
    """q4_1: every matrix in Q4_1 blocks (llama-quantize --pure), of the model's own weights."""
    sd = {k: np32(v) for k, v in model.state_dict().items()}
    gw = gguf.GGUFWriter(path, "llama")
    tensor = functools.partial(put, q4_1=q4_1)

    gw.add_name("tiny-llama (hf_tiny_ref.py)")
    gw.add_context_length(cfg.max_position_embeddings)
    gw.add_embedding_length(cfg.hidden_size)
    gw.add_block_count(cfg.num_hidden_layers)
    gw.add_feed_forward_length(cfg.intermediate_size)
    gw.add_head_count(cfg.num_attention_heads)
    gw.add_head_count_kv(cfg.num_key_value_heads)
    gw.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    gw.add_rope_freq_base(rope["rope_theta"])
    gw.add_rope_dimension_count(cfg.head_dim)
    gw.add_vocab_size(cfg.vocab_size)
    gw.add_file_type(3 if q4_1 else 32)  # MOSTLY_Q4_1, MOSTLY_BF16
    gw.add_string("llama.rope.scaling.type", "llama3")
    gw.add_float32("llama.rope.scaling.factor", rope["factor"])
    gw.add_float32("llama.rope.scaling.low_freq_factor", rope["low_freq_factor"])
    gw.add_float32("llama.rope.scaling.high_freq_factor", rope["high_freq_factor"])
    gw.add_uint32("llama.rope.scaling.original_context_length",
                  rope["original_max_position_embeddings"])
    tensor(gw, gguf, "token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        tensor(gw, gguf, f"blk.{i}.attn_norm.weight", sd[p + "input_layernorm.weight"])
        tensor(gw, gguf, f"blk.{i}.attn_q.weight",
               llama_permute(sd[p + "self_attn.q_proj.weight"], cfg.num_attention_heads))
        tensor(gw, gguf, f"blk.{i}.attn_k.weight",
               llama_permute(sd[p + "self_attn.k_proj.weight"], cfg.num_key_value_heads))
        tensor(gw, gguf, f"blk.{i}.attn_v.weight", sd[p + "self_attn.v_proj.weight"])
        tensor(gw, gguf, f"blk.{i}.attn_output.weight", sd[p + "self_attn.o_proj.weight"])
        tensor(gw, gguf, f"blk.{i}.ffn_norm.weight", sd[p + "post_attention_layernorm.weight"])
        tensor(gw, gguf, f"blk.{i}.ffn_gate.weight", sd[p + "mlp.gate_proj.weight"])
        tensor(gw, gguf, f"blk.{i}.ffn_up.weight", sd[p + "mlp.up_proj.weight"])
        tensor(gw, gguf, f"blk.{i}.ffn_down.weight", sd[p + "mlp.down_proj.weight"])
    tensor(gw, gguf, "output_norm.weight", sd["model.norm.weight"])
    tensor(gw, gguf, "output.weight", sd["lm_head.weight"])
    finish(gw)


def write_gemma3_gguf(model, cfg, path, gguf):
    sd = {k: np32(v) for k, v in model.state_dict().items()}
    tensor = put
    gw = gguf.GGUFWriter(path, "gemma3")
    gw.add_name("tiny-gemma3 (hf_tiny_ref.py)")
    gw.add_context_length(cfg.max_position_embeddings)
    gw.add_embedding_length(cfg.hidden_size)
    gw.add_block_count(cfg.num_hidden_layers)
    gw.add_feed_forward_length(cfg.intermediate_size)
    gw.add_head_count(cfg.num_attention_heads)
    gw.add_head_count_kv(cfg.num_key_value_heads)
    gw.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    gw.add_key_length(cfg.head_dim)
    gw.add_value_length(cfg.head_dim)
    gw.add_rope_freq_base(cfg.rope_parameters["full_attention"]["rope_theta"])
    gw.add_sliding_window(cfg.sliding_window)
    gw.add_vocab_size(cfg.vocab_size)
    gw.add_file_type(32)
    # Gemma's RMSNorm scales by (1 + w); convert stores 1 + w so GGML multiplies by it.
    norm = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
            "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
            "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm"}
    lin = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
           "mlp.down_proj": "ffn_down"}
    tensor(gw, gguf, "token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        for hf, gg in norm.items():
            tensor(gw, gguf, f"blk.{i}.{gg}.weight", sd[p + hf + ".weight"] + 1.0)
        for hf, gg in lin.items():
            tensor(gw, gguf, f"blk.{i}.{gg}.weight", sd[p + hf + ".weight"])
    tensor(gw, gguf, "output_norm.weight", sd["model.norm.weight"] + 1.0)
    finish(gw)


def finish(gw):
    gw.write_header_to_file()
    gw.write_kv_data_to_file()
    gw.write_tensors_to_file()
    gw.close()


def save_hf(model, torch, path):
    """bf16 safetensors (lossless: the weights are bf16-exact) from a copy, so the model's
    float32 buffers stay as they are."""
    import copy
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(path, safe_serialization=True)
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(path, extra)):
            os.remove(os.path.join(path, extra))


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(root, "tests/data/tiny_hf"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)

    import gguf
    import torch
    import transformers
    from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig,
                              LlamaForCausalLM)
    torch.manual_seed(0)
    meta = {"generator": "tests/tools/hf_tiny_ref.py", "transformers": transformers.__version__,
            "torch": torch.__version__, "attn_implementation": "eager"}

    # Llama with llama3 RoPE scaling: with theta 1e4 and head_dim 8 the wavelengths are 6.3,
    # 63, 628 and 6283; old context 64 with factors 1 and 4 puts them in all three bands.
    rope = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                      rms_norm_eps=1e-5, max_position_embeddings=128, rope_parameters=rope,
                      tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    llama = LlamaForCausalLM(cfg).eval()
    bf16_exact(llama, torch, 1, 1.0)
    save_hf(llama, torch, os.path.join(args.out, "llama"))
    write_llama_gguf(llama, cfg, rope, os.path.join(args.out, "llama.gguf"), gguf)
    ref = references(llama, torch, os.path.join(args.out, "llama"), [1, 17, 5, 40, 63, 9, 22], [33, 2, 48],
                     dict(meta, model="llama"))
    with open(os.path.join(args.out, "llama-ref.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    # The same Llama with Q4_1 matrices: HF runs what the blocks dequantize to.
    write_llama_gguf(llama, cfg, rope, os.path.join(args.out, "llama-q4_1.gguf"), gguf, True)
    ref = references(q4_1_model(llama, torch, gguf), torch, None,
                     [1, 17, 5, 40, 63, 9, 22], [33, 2, 48], dict(meta, model="llama-q4_1"))
    with open(os.path.join(args.out, "llama-q4_1-ref.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")

    # Gemma 3 text: llama.cpp reads no layer pattern from the file and takes Gemma 3's (five
    # sliding layers, then a global one) and local rope base 1e4, so 6 layers give one global;
    # a window of 4 under a 9-token prompt makes the sliding layers cut.
    g = Gemma3TextConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=6,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                         query_pre_attn_scalar=16, rms_norm_eps=1e-6, sliding_window=4,
                         layer_types=["sliding_attention"] * 5 + ["full_attention"],
                         rope_parameters={"sliding_attention": {"rope_type": "default",
                                                                "rope_theta": 10000.0},
                                          "full_attention": {"rope_type": "default",
                                                             "rope_theta": 1000000.0}},
                         max_position_embeddings=128, final_logit_softcapping=None,
                         attn_logit_softcapping=None, tie_word_embeddings=True,
                         pad_token_id=0, bos_token_id=2, eos_token_id=1)
    gemma = Gemma3ForCausalLM(g).eval()
    bf16_exact(gemma, torch, 2, 0.0)
    save_hf(gemma, torch, os.path.join(args.out, "gemma3"))
    write_gemma3_gguf(gemma, g, os.path.join(args.out, "gemma3.gguf"), gguf)
    ref = references(gemma, torch, os.path.join(args.out, "gemma3"), [2, 17, 5, 40, 63, 9, 22, 31, 8], [33, 1, 48],
                     dict(meta, model="gemma3"))
    with open(os.path.join(args.out, "gemma3-ref.json"), "w") as f:
        json.dump(ref, f, separators=(",", ":"))
        f.write("\n")
    print("bf16 vs f32 (HF):", ref["bf16_rel_err"])


if __name__ == "__main__":
    main()
