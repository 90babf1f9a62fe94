"""Export a LLaDA-MoE / RND1 style state dict to a llama.cpp-layout GGUF file (architecture
"llada-moe" or "rnd1"; they differ in metadata only: RND1 writes no diffusion.shift_logits, so
readers take it as shifted, and its chosen expert weights are renormalised by the reader).

Input state dict (HF convention, half-split "rotate_half" RoPE; llama.cpp's converter does not
permute Q/K for this architecture and ropes it NEOX-style):
  tok_emb.weight [V,d]; norm.weight [d]; lm_head.weight [V,d] (absent => tied);
  layers.{i}.attn_norm.weight [d]; wq.weight [nh*hd,d]; wk/wv.weight [nkv*hd,d]; wo.weight;
  layers.{i}.q_norm.weight / k_norm.weight [hd]; ffn_norm.weight [d];
  layers.{i}.router.weight [E,d]; exp_gate.weight / exp_up.weight [E,ff_exp,d];
  exp_down.weight [E,d,ff_exp].
config: n_layer, d_model, n_head, n_kv_head, vocab, rope_base, eps, context_length,
  n_expert, n_expert_used, ff_exp; optional head_dim (written as attention.key_length /
  value_length; default d_model / n_head).
The router is written as F32 whatever `dtype` (routing is sensitive); norms are F32 too.
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402
from export import _write_tokenizer, roundtrip_state_dict, synthetic_tokenizer, to_np  # noqa: E402

MOE_MATRIX_SUFFIXES = ("wq.weight", "wk.weight", "wv.weight", "wo.weight", "exp_gate.weight",
                       "exp_up.weight", "exp_down.weight")


def _write_metadata(w: gw.GGUFWriter, a: str, c: dict, name: str, mtype: int):
    d, nh = int(c["d_model"]), int(c["n_head"])
    hd = int(c.get("head_dim", d // nh))
    w.add_string("general.architecture", a)
    w.add_string("general.name", name)
    w.add_uint32("general.file_type", gw.FILE_TYPE[mtype])
    w.add_uint32(f"{a}.context_length", int(c.get("context_length", 4096)))
    w.add_uint32(f"{a}.embedding_length", d)
    w.add_uint32(f"{a}.block_count", int(c["n_layer"]))
    w.add_uint32(f"{a}.feed_forward_length", int(c["ff_exp"]) * int(c["n_expert_used"]))
    w.add_uint32(f"{a}.expert_feed_forward_length", int(c["ff_exp"]))
    w.add_uint32(f"{a}.expert_count", int(c["n_expert"]))
    w.add_uint32(f"{a}.expert_used_count", int(c["n_expert_used"]))
    w.add_uint32(f"{a}.attention.head_count", nh)
    w.add_uint32(f"{a}.attention.head_count_kv", int(c["n_kv_head"]))
    w.add_float32(f"{a}.attention.layer_norm_rms_epsilon", float(c["eps"]))
    w.add_float32(f"{a}.rope.freq_base", float(c.get("rope_base", 10000.0)))
    if "head_dim" in c:
        w.add_uint32(f"{a}.attention.key_length", hd)
        w.add_uint32(f"{a}.attention.value_length", hd)
    w.add_uint32(f"{a}.rope.dimension_count", hd)
    w.add_bool(f"{a}.attention.causal", False)
    w.add_uint32(f"{a}.vocab_size", int(c["vocab"]))
    if a == "llada-moe":
        w.add_bool("diffusion.shift_logits", False)


def export_llada_moe(state_dict, config: dict, tokenizer: dict | None, path: str,
                     dtype: str = "bf16", name: str | None = None, arch: str = "llada-moe"):
    sd = {k: to_np(v) for k, v in state_dict.items()}
    c = config
    L, d, nh, nkv = int(c["n_layer"]), int(c["d_model"]), int(c["n_head"]), int(c["n_kv_head"])
    V, E, ff = int(c["vocab"]), int(c["n_expert"]), int(c["ff_exp"])
    hd = int(c.get("head_dim", d // nh))
    mtype = gw.GGML_TYPE_BY_NAME[dtype.lower()]
    w = gw.GGUFWriter()
    _write_metadata(w, arch, c, name or f"{arch}-export", mtype)
    _write_tokenizer(w, tokenizer if tokenizer is not None else synthetic_tokenizer(V, "llada"))

    def chk(key, shape):
        assert sd[key].shape == tuple(shape), f"{key}: {sd[key].shape} != {shape}"
        return sd[key]

    F32 = gw.GGML_F32
    w.add_tensor("token_embd.weight", chk("tok_emb.weight", (V, d)), mtype)
    w.add_tensor("output_norm.weight", chk("norm.weight", (d,)), F32)
    if "lm_head.weight" in sd:
        w.add_tensor("output.weight", chk("lm_head.weight", (V, d)), mtype)
    for i in range(L):
        p, b = f"layers.{i}.", f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", chk(p + "attn_norm.weight", (d,)), F32)
        w.add_tensor(b + "attn_q.weight", chk(p + "wq.weight", (nh * hd, d)), mtype)
        w.add_tensor(b + "attn_k.weight", chk(p + "wk.weight", (nkv * hd, d)), mtype)
        w.add_tensor(b + "attn_v.weight", chk(p + "wv.weight", (nkv * hd, d)), mtype)
        w.add_tensor(b + "attn_q_norm.weight", chk(p + "q_norm.weight", (hd,)), F32)
        w.add_tensor(b + "attn_k_norm.weight", chk(p + "k_norm.weight", (hd,)), F32)
        w.add_tensor(b + "attn_output.weight", chk(p + "wo.weight", (d, nh * hd)), mtype)
        w.add_tensor(b + "ffn_norm.weight", chk(p + "ffn_norm.weight", (d,)), F32)
        w.add_tensor(b + "ffn_gate_inp.weight", chk(p + "router.weight", (E, d)), F32)
        # numpy [E, ff, d] is ggml ne = {d, ff, E}: expert e's matrix is one contiguous slice
        w.add_tensor(b + "ffn_gate_exps.weight", chk(p + "exp_gate.weight", (E, ff, d)), mtype)
        w.add_tensor(b + "ffn_up_exps.weight", chk(p + "exp_up.weight", (E, ff, d)), mtype)
        w.add_tensor(b + "ffn_down_exps.weight", chk(p + "exp_down.weight", (E, d, ff)), mtype)
    w.write(path)
    return path


def roundtrip_moe_state_dict(state_dict, dtype: str) -> dict:
    """The weights (HF layout, float32) a reader of an exported file of `dtype` sees (the router
    stays F32, as written)."""
    return roundtrip_state_dict(state_dict, dtype, MOE_MATRIX_SUFFIXES)
