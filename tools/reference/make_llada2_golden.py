#!/usr/bin/env python3
"""A tiny seeded random-weight llada2 (LLaDA2.x / BailingMoeV2) model in F32, BF16 and Q8_0 plus
reference logits, in tests/data/block/.

Run:  OMP_NUM_THREADS=2 /usr/bin/python3 tools/reference/make_llada2_golden.py [out_dir]
Writes llada2-tiny{,-bf16,-q8_0}.gguf (tools/gguf_py/export_llada2.py), their
<name>.logits.f32 (raw little-endian float32, row-major [n_tokens][n_vocab], unshifted rows, from
tools/reference/reference_llada2.py on the weights as stored in each file) and llada2_golden.json
(the manifest, read by tests/model_llada2_test.cpp). The shape keeps every feature of the
published model: a dense first layer, then a routed layer with 8 experts in 4 groups (2 groups
used, top-2 experts), a choice bias, one shared expert, routed_scaling_factor 2.5, GQA with
head_dim 32 != d / n_head, a fused QKV, Q/K norms and RoPE over half of each head.

Routing is a discontinuous choice: a score that moves by a rounding can change the experts a row
takes. The engine computes its projections with bf16-rounded operands (the router itself in
float32), so its router inputs differ from this float32 reference. The generator measures by how
much: it reruns the reference with every projection's operands rounded to bf16 (the `probe` of
reference_llada2.py) and takes the largest change of any choice score. The seed is the first
from SEED on whose every routing decision (groups and experts, every row, layer and file) is at
least SAFETY times that change apart, so the engine takes the reference's experts on every row.
Margins and the measured change are in the manifest.
"""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "gguf_py"))
sys.path.insert(0, HERE)

import export as ex  # noqa: E402
import export_llada2 as exl  # noqa: E402
import gguf_reader as gr  # noqa: E402
from reference_llada2 import reference_forward_llada2  # noqa: E402

# config.json of a tiny LLaDA2MoeModelLM (the published mini's keys, small widths)
HF_CONFIG = {
    "architectures": ["LLaDA2MoeModelLM"], "model_type": "llada2_moe", "vocab_size": 300,
    "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "rms_norm_eps": 1e-6,
    "max_position_embeddings": 512, "rope_theta": 600000.0, "partial_rotary_factor": 0.5,
    "rope_scaling": None, "num_experts": 8, "num_experts_per_tok": 2, "n_group": 4,
    "topk_group": 2, "moe_intermediate_size": 32, "num_shared_experts": 1,
    "first_k_dense_replace": 1, "norm_topk_prob": True, "routed_scaling_factor": 2.5,
    "score_function": "sigmoid", "moe_router_enable_expert_bias": True, "use_qk_norm": True,
    "use_qkv_bias": False, "use_bias": False, "tie_word_embeddings": False,
    "num_nextn_predict_layers": 0, "hidden_act": "silu", "eos_token_id": 257,
}
BLOCK_LENGTH = 8
SEED = 6400
SAFETY = 3.0
DTYPES = ("f32", "bf16", "q8_0")


def make_state_dict(hc: dict, seed: int) -> dict:
    g = np.random.default_rng(seed)
    d, nh, nkv, hd = hc["hidden_size"], hc["num_attention_heads"], hc["num_key_value_heads"], \
        hc["head_dim"]
    V, ff, ffe, E = hc["vocab_size"], hc["intermediate_size"], hc["moe_intermediate_size"], \
        hc["num_experts"]

    def lin(*shape, gain=1.0):
        return (g.standard_normal(shape) * gain / math.sqrt(shape[-1])).astype(np.float32)

    def norm_w(n):
        return (1.0 + 0.1 * g.standard_normal(n)).astype(np.float32)

    sd = {"model.word_embeddings.weight": g.standard_normal((V, d)).astype(np.float32)}
    for i in range(hc["num_hidden_layers"]):
        p = f"model.layers.{i}."
        sd[p + "input_layernorm.weight"] = norm_w(d)
        sd[p + "attention.query_key_value.weight"] = lin((nh + 2 * nkv) * hd, d)
        sd[p + "attention.query_layernorm.weight"] = norm_w(hd)
        sd[p + "attention.key_layernorm.weight"] = norm_w(hd)
        sd[p + "attention.dense.weight"] = lin(d, nh * hd)
        sd[p + "post_attention_layernorm.weight"] = norm_w(d)
        m = p + "mlp."
        if i < hc["first_k_dense_replace"]:
            sd[m + "gate_proj.weight"] = lin(ff, d)
            sd[m + "up_proj.weight"] = lin(ff, d)
            sd[m + "down_proj.weight"] = lin(d, ff)
            continue
        sd[m + "gate.weight"] = lin(E, d, gain=2.0)
        sd[m + "gate.expert_bias"] = (0.1 * g.standard_normal(E)).astype(np.float32)
        for e in range(E):
            sd[m + f"experts.{e}.gate_proj.weight"] = lin(ffe, d)
            sd[m + f"experts.{e}.up_proj.weight"] = lin(ffe, d)
            sd[m + f"experts.{e}.down_proj.weight"] = lin(d, ffe)
        ffs = ffe * hc["num_shared_experts"]
        sd[m + "shared_experts.gate_proj.weight"] = lin(ffs, d)
        sd[m + "shared_experts.up_proj.weight"] = lin(ffs, d)
        sd[m + "shared_experts.down_proj.weight"] = lin(d, ffs)
    sd["model.norm.weight"] = norm_w(d)
    sd["lm_head.weight"] = lin(V, d, gain=2.0)
    return sd


def references(sd: dict, tokens) -> dict:
    """dtype -> (logits, routing margin, largest choice-score change under bf16 operands) on the
    weights a file of that dtype holds."""
    out = {}
    for dt in DTYPES:
        want = exl.roundtrip_llada2_state_dict(sd, dt)
        with torch.no_grad():
            logits, margin, choices = reference_forward_llada2(want, HF_CONFIG, tokens,
                                                               BLOCK_LENGTH)
            _, _, probed = reference_forward_llada2(want, HF_CONFIG, tokens, BLOCK_LENGTH,
                                                    probe=True)
        moved = max(float((a - b).abs().max()) for a, b in zip(choices, probed))
        out[dt] = (logits.numpy().astype(np.float32), margin, moved)
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "block")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    tok = ex.synthetic_tokenizer(HF_CONFIG["vocab_size"], "dream")
    m = tok["mask"]
    rng = np.random.default_rng(77)
    tokens = [tok["tokens"].index("<|im_start|>")] + [int(t) for t in rng.integers(0, 290, 57)]
    tokens += [m] * 10 + [46, tok["eot"]]
    assert len(tokens) == 70
    seed = SEED
    while True:  # the first seed whose routing decisions all clear SAFETY x the change
        sd = make_state_dict(HF_CONFIG, seed)
        refs = references(sd, tokens)
        if all(mg >= SAFETY * moved for _, mg, moved in refs.values()):
            break
        seed += 1
    entries = []
    for dt in DTYPES:
        fname = "llada2-tiny.gguf" if dt == "f32" else f"llada2-tiny-{dt}.gguf"
        path = os.path.join(out, fname)
        exl.export_llada2(sd, HF_CONFIG, tok, path, BLOCK_LENGTH, dtype=dt, name=fname[:-5])
        want = exl.roundtrip_llada2_state_dict(sd, dt)
        r = gr.GGUFReader(path)  # the file holds exactly the round-tripped weights
        assert np.array_equal(r.tensor("blk.1.attn_qkv.weight"),
                              want["model.layers.1.attention.query_key_value.weight"])
        assert np.array_equal(r.tensor("blk.1.ffn_up_exps.weight")[3],
                              want["model.layers.1.mlp.experts.3.up_proj.weight"])
        assert os.path.getsize(path) < 1 << 20
        logits, margin, moved = refs[dt]
        lf = fname[:-5] + ".logits.f32"
        logits.astype("<f4").tofile(os.path.join(out, lf))
        entries.append({"file": fname, "weight_type": dt, "logits": lf, "ref_std": float(logits.std()),
                        "ref_max_abs": float(np.abs(logits).max()), "routing_margin": margin,
                        "choice_change_bf16": moved})
        print(f"{fname:24s} {os.path.getsize(path):8d} B  std {logits.std():.3f}  "
              f"margin {margin:.4f}  bf16 change {moved:.5f}")
    manifest = {"generator": "tools/reference/make_llada2_golden.py",
                "reference": "tools/reference/reference_llada2.py (torch float32, block-causal "
                             "mask, partial NEOX RoPE, grouped sigmoid routing) on the weights as "
                             "stored in each file",
                "logits_format": "raw little-endian float32, row-major [n_tokens][n_vocab], "
                                 "unshifted rows",
                "hf_config": HF_CONFIG, "block_length": BLOCK_LENGTH, "seed": seed,
                "safety": SAFETY, "tokens": [int(t) for t in tokens],
                "mask_token_id": tok["mask"], "n_vocab": HF_CONFIG["vocab_size"],
                "models": entries}
    with open(os.path.join(out, "llada2_golden.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
