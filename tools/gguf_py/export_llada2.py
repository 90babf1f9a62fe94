"""Export a LLaDA2.x (BailingMoeV2) state dict to a GGUF file of architecture "llada2": llama.cpp's
bailingmoe2 tensor names and {arch}.* keys under the architecture name llada2, plus bicache's
diffusion.block_length and the mask token id (docs/model-formats.md, "llada2").

Input: the Hugging Face checkpoint's own names and config.json (LLaDA2MoeModelLM):
  model.word_embeddings.weight [V,d]; model.norm.weight [d]; lm_head.weight [V,d];
  model.layers.{i}.input_layernorm.weight [d]; attention.query_key_value.weight
  [(nh+2*nkv)*hd, d] (Q rows, then K, then V; not permuted: NEOX RoPE);
  attention.query_layernorm.weight / key_layernorm.weight [hd]; attention.dense.weight [d, nh*hd];
  post_attention_layernorm.weight [d];
  layers < first_k_dense_replace: mlp.{gate,up}_proj.weight [ff,d], mlp.down_proj.weight [d,ff];
  the others: mlp.gate.weight [E,d], mlp.gate.expert_bias [E],
  mlp.experts.{e}.{gate,up}_proj.weight [ff_exp,d], mlp.experts.{e}.down_proj.weight [d,ff_exp],
  mlp.shared_experts.{gate,up}_proj.weight [ff_exp*n_shared,d], .down_proj.weight [d, ...].
The router (ffn_gate_inp), its bias (exp_probs_b) and the norms are written as F32 whatever
`dtype`; `omit` names keys or tensors to leave out (bad-file fixtures).
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_writer as gw  # noqa: E402
from export import _write_tokenizer, synthetic_tokenizer, to_np  # noqa: E402

ARCH = "llada2"
GATING_SIGMOID = 2  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID


def head_dim(hc: dict) -> int:
    return int(hc.get("head_dim") or hc["hidden_size"] // hc["num_attention_heads"])


def rope_dim(hc: dict) -> int:
    return int(head_dim(hc) * float(hc.get("partial_rotary_factor", 1.0)))


def _write_metadata(w: gw.GGUFWriter, hc: dict, block_length: int, name: str, mtype: int, omit):
    a = ARCH

    def put(kind, key, v):
        if key not in omit:
            getattr(w, "add_" + kind)(key, v)

    hd = head_dim(hc)
    w.add_string("general.architecture", a)
    w.add_string("general.name", name)
    w.add_uint32("general.file_type", gw.FILE_TYPE[mtype])
    put("uint32", f"{a}.context_length", int(hc["max_position_embeddings"]))
    put("uint32", f"{a}.embedding_length", int(hc["hidden_size"]))
    put("uint32", f"{a}.block_count", int(hc["num_hidden_layers"]))
    put("uint32", f"{a}.feed_forward_length", int(hc["intermediate_size"]))
    put("uint32", f"{a}.attention.head_count", int(hc["num_attention_heads"]))
    put("uint32", f"{a}.attention.head_count_kv", int(hc["num_key_value_heads"]))
    put("uint32", f"{a}.attention.key_length", hd)
    put("uint32", f"{a}.attention.value_length", hd)
    put("float32", f"{a}.attention.layer_norm_rms_epsilon", float(hc["rms_norm_eps"]))
    put("float32", f"{a}.rope.freq_base", float(hc.get("rope_theta", 10000.0)))
    put("uint32", f"{a}.rope.dimension_count", rope_dim(hc))
    put("uint32", f"{a}.vocab_size", int(hc["vocab_size"]))
    put("uint32", f"{a}.leading_dense_block_count", int(hc["first_k_dense_replace"]))
    put("uint32", f"{a}.expert_count", int(hc["num_experts"]))
    put("uint32", f"{a}.expert_used_count", int(hc["num_experts_per_tok"]))
    put("uint32", f"{a}.expert_group_count", int(hc.get("n_group", 1)))
    put("uint32", f"{a}.expert_group_used_count", int(hc.get("topk_group", 1)))
    put("uint32", f"{a}.expert_gating_func", GATING_SIGMOID)
    put("uint32", f"{a}.expert_feed_forward_length", int(hc["moe_intermediate_size"]))
    put("uint32", f"{a}.expert_shared_feed_forward_length",
        int(hc["moe_intermediate_size"]) * int(hc["num_shared_experts"]))
    put("uint32", f"{a}.expert_shared_count", int(hc["num_shared_experts"]))
    put("float32", f"{a}.expert_weights_scale", float(hc.get("routed_scaling_factor", 1.0)))
    put("bool", f"{a}.expert_weights_norm", bool(hc.get("norm_topk_prob", True)))
    put("uint32", "diffusion.block_length", int(block_length))


def export_llada2(state_dict, hf_config: dict, tokenizer: dict | None, path: str,
                  block_length: int, dtype: str = "bf16", name: str | None = None, omit=()):
    hc = hf_config
    sd = {k: to_np(v) for k, v in state_dict.items()}
    L, d = int(hc["num_hidden_layers"]), int(hc["hidden_size"])
    nh, nkv, hd = int(hc["num_attention_heads"]), int(hc["num_key_value_heads"]), head_dim(hc)
    V, E = int(hc["vocab_size"]), int(hc["num_experts"])
    ff, ffe = int(hc["intermediate_size"]), int(hc["moe_intermediate_size"])
    ffs = ffe * int(hc["num_shared_experts"])
    mtype = gw.GGML_TYPE_BY_NAME[dtype.lower()]
    w = gw.GGUFWriter()
    _write_metadata(w, hc, block_length, name or f"{ARCH}-export", mtype, omit)
    tok = dict(tokenizer if tokenizer is not None else synthetic_tokenizer(V, "dream"))
    if "tokenizer.ggml.mask_token_id" in omit:
        tok["mask"] = None
    _write_tokenizer(w, tok)

    def put(gguf_name, a, shape, t):
        if gguf_name in omit:
            return
        assert a.shape == tuple(shape), f"{gguf_name}: {a.shape} != {shape}"
        w.add_tensor(gguf_name, np.ascontiguousarray(a, dtype=np.float32), t)

    F32 = gw.GGML_F32
    put("token_embd.weight", sd["model.word_embeddings.weight"], (V, d), mtype)
    put("output_norm.weight", sd["model.norm.weight"], (d,), F32)
    put("output.weight", sd["lm_head.weight"], (V, d), mtype)
    for i in range(L):
        h, b = f"model.layers.{i}.", f"blk.{i}."
        put(b + "attn_norm.weight", sd[h + "input_layernorm.weight"], (d,), F32)
        put(b + "attn_qkv.weight", sd[h + "attention.query_key_value.weight"],
            ((nh + 2 * nkv) * hd, d), mtype)
        put(b + "attn_q_norm.weight", sd[h + "attention.query_layernorm.weight"], (hd,), F32)
        put(b + "attn_k_norm.weight", sd[h + "attention.key_layernorm.weight"], (hd,), F32)
        put(b + "attn_output.weight", sd[h + "attention.dense.weight"], (d, nh * hd), mtype)
        put(b + "ffn_norm.weight", sd[h + "post_attention_layernorm.weight"], (d,), F32)
        m = h + "mlp."
        if i < int(hc["first_k_dense_replace"]):
            put(b + "ffn_gate.weight", sd[m + "gate_proj.weight"], (ff, d), mtype)
            put(b + "ffn_up.weight", sd[m + "up_proj.weight"], (ff, d), mtype)
            put(b + "ffn_down.weight", sd[m + "down_proj.weight"], (d, ff), mtype)
            continue
        put(b + "ffn_gate_inp.weight", sd[m + "gate.weight"], (E, d), F32)
        put(b + "exp_probs_b.bias", sd[m + "gate.expert_bias"], (E,), F32)
        # numpy [E, ff, d] is ggml ne = {d, ff, E}: expert e's matrix is one contiguous slice
        for proj, shape in (("gate", (E, ffe, d)), ("up", (E, ffe, d)), ("down", (E, d, ffe))):
            stacked = np.stack([sd[m + f"experts.{e}.{proj}_proj.weight"] for e in range(E)])
            put(b + f"ffn_{proj}_exps.weight", stacked, shape, mtype)
        put(b + "ffn_gate_shexp.weight", sd[m + "shared_experts.gate_proj.weight"], (ffs, d), mtype)
        put(b + "ffn_up_shexp.weight", sd[m + "shared_experts.up_proj.weight"], (ffs, d), mtype)
        put(b + "ffn_down_shexp.weight", sd[m + "shared_experts.down_proj.weight"], (d, ffs),
            mtype)
    w.write(path)
    return path


def is_f32_tensor(name: str) -> bool:
    """Whether export_llada2 writes this HF tensor as F32 whatever the dtype."""
    return name.endswith(("norm.weight", "layernorm.weight", "mlp.gate.weight", "expert_bias"))


def roundtrip_llada2_state_dict(state_dict, dtype: str) -> dict:
    """The weights (HF names, float32) a reader of a file exported as `dtype` sees."""
    mtype = gw.GGML_TYPE_BY_NAME[dtype.lower()]
    return {k: (to_np(v) if is_f32_tensor(k) else gw.roundtrip(to_np(v), mtype))
            for k, v in state_dict.items()}
