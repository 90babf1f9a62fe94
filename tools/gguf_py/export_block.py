"""Export a block-diffusion state dict to a llama.cpp-layout GGUF file: architecture "sdar"
(Qwen3 layout: per-head RMSNorm on Q and K, no Q/K/V bias) or "fast-dllm-v2" (Qwen2.5 layout:
Q/K/V biases). Tensor names and {arch}.* keys are llama.cpp's qwen3 / qwen2 ones with the
architecture name changed; Q/K rows are not permuted (NEOX RoPE). The diffusion.* keys are
bicache's (docs/model-formats.md): diffusion.block_length, and for fast-dllm-v2
diffusion.sub_block_length; the mask token is tokenizer.ggml.mask_token_id.

Input state dict (HF convention, half-split "rotate_half" RoPE):
  tok_emb.weight [V,d]; norm.weight [d]; lm_head.weight [V,d] (absent => tied);
  layers.{i}.attn_norm.weight [d]; wq.weight [nh*hd,d]; wk/wv.weight [nkv*hd,d]; wo.weight;
  sdar: layers.{i}.q_norm.weight / k_norm.weight [hd];
  fast-dllm-v2: layers.{i}.wq.bias [nh*hd], wk.bias / wv.bias [nkv*hd];
  layers.{i}.ffn_norm.weight; w_gate.weight / w_up.weight [ff,d]; w_down.weight [d,ff].
config: n_layer, d_model, n_head, n_kv_head, ff, vocab, rope_base, eps, context_length,
  block_length; optional head_dim (written as attention.key_length / value_length),
  sub_block_length (fast-dllm-v2).
`omit` names keys or tensors to leave out (bad-file fixtures).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402
from export import _write_tokenizer, roundtrip_state_dict, synthetic_tokenizer, to_np  # noqa: E402

ARCHS = ("sdar", "fast-dllm-v2")


def _write_metadata(w: gw.GGUFWriter, a: str, c: dict, name: str, mtype: int, omit):
    d, nh = int(c["d_model"]), int(c["n_head"])
    hd = int(c.get("head_dim", d // nh))

    def u32(key, v):
        if key not in omit:
            w.add_uint32(key, int(v))

    w.add_string("general.architecture", a)
    w.add_string("general.name", name)
    w.add_uint32("general.file_type", gw.FILE_TYPE[mtype])
    u32(f"{a}.context_length", c.get("context_length", 4096))
    u32(f"{a}.embedding_length", d)
    u32(f"{a}.block_count", c["n_layer"])
    u32(f"{a}.feed_forward_length", c["ff"])
    u32(f"{a}.attention.head_count", nh)
    u32(f"{a}.attention.head_count_kv", c["n_kv_head"])
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", float(c["eps"]))
    w.add_float32(f"{a}.rope.freq_base", float(c.get("rope_base", 10000.0)))
    if "head_dim" in c:
        u32(f"{a}.attention.key_length", hd)
        u32(f"{a}.attention.value_length", hd)
    u32(f"{a}.rope.dimension_count", hd)
    u32(f"{a}.vocab_size", c["vocab"])
    u32("diffusion.block_length", c["block_length"])
    if "sub_block_length" in c:
        u32("diffusion.sub_block_length", c["sub_block_length"])


def export_block(state_dict, config: dict, tokenizer: dict | None, path: str, arch: str,
                 dtype: str = "bf16", name: str | None = None, omit=()):
    assert arch in ARCHS, arch
    sd = {k: to_np(v) for k, v in state_dict.items()}
    c = config
    L, d, nh, nkv = int(c["n_layer"]), int(c["d_model"]), int(c["n_head"]), int(c["n_kv_head"])
    ff, V = int(c["ff"]), int(c["vocab"])
    hd = int(c.get("head_dim", d // nh))
    mtype = gw.GGML_TYPE_BY_NAME[dtype.lower()]
    w = gw.GGUFWriter()
    _write_metadata(w, arch, c, name or f"{arch}-export", mtype, omit)
    tok = dict(tokenizer if tokenizer is not None else synthetic_tokenizer(V, "dream"))
    if "tokenizer.ggml.mask_token_id" in omit:
        tok["mask"] = None
    _write_tokenizer(w, tok)

    def put(gguf_name, key, shape, t):
        if gguf_name in omit:
            return
        assert sd[key].shape == tuple(shape), f"{key}: {sd[key].shape} != {shape}"
        w.add_tensor(gguf_name, sd[key], t)

    F32 = gw.GGML_F32
    put("token_embd.weight", "tok_emb.weight", (V, d), mtype)
    put("output_norm.weight", "norm.weight", (d,), F32)
    if "lm_head.weight" in sd:
        put("output.weight", "lm_head.weight", (V, d), mtype)
    for i in range(L):
        p, b = f"layers.{i}.", f"blk.{i}."
        put(b + "attn_norm.weight", p + "attn_norm.weight", (d,), F32)
        put(b + "attn_q.weight", p + "wq.weight", (nh * hd, d), mtype)
        put(b + "attn_k.weight", p + "wk.weight", (nkv * hd, d), mtype)
        put(b + "attn_v.weight", p + "wv.weight", (nkv * hd, d), mtype)
        if arch == "fast-dllm-v2":
            put(b + "attn_q.bias", p + "wq.bias", (nh * hd,), F32)
            put(b + "attn_k.bias", p + "wk.bias", (nkv * hd,), F32)
            put(b + "attn_v.bias", p + "wv.bias", (nkv * hd,), F32)
        else:
            put(b + "attn_q_norm.weight", p + "q_norm.weight", (hd,), F32)
            put(b + "attn_k_norm.weight", p + "k_norm.weight", (hd,), F32)
        put(b + "attn_output.weight", p + "wo.weight", (d, nh * hd), mtype)
        put(b + "ffn_norm.weight", p + "ffn_norm.weight", (d,), F32)
        put(b + "ffn_gate.weight", p + "w_gate.weight", (ff, d), mtype)
        put(b + "ffn_up.weight", p + "w_up.weight", (ff, d), mtype)
        put(b + "ffn_down.weight", p + "w_down.weight", (d, ff), mtype)
    w.write(path)
    return path


def roundtrip_block_state_dict(state_dict, dtype: str) -> dict:
    """The weights (HF layout, float32) a reader of an exported file of `dtype` sees (biases and
    norms stay F32, as written)."""
    return roundtrip_state_dict(state_dict, dtype)
