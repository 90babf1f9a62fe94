#!/usr/bin/env python3
"""Tiny seeded random-weight sdar and fast-dllm-v2 GGUF files plus reference logits, in
tests/data/block/.

Run:  OMP_NUM_THREADS=2 /usr/bin/python3 tools/reference/make_block_golden.py [out_dir]
Writes {sdar,fast-dllm-v2}-tiny{,-bf16,-q8_0}.gguf, their <name>.logits.f32 (raw little-endian
float32, row-major [n_tokens][n_vocab], unshifted rows, from tools/reference/reference_block.py
on the weights as stored in each file) and block_golden.json (the manifest, read by
tests/model_block_test.cpp). 70 tokens: a full forward takes the oneDNN attention path (>= 64
query rows), the tests' shorter and cached forwards the tiled and few-row ones.
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
import export_block as exb  # noqa: E402
import gguf_reader as gr  # noqa: E402
from reference_block import reference_forward_block  # noqa: E402

# SDAR: Qwen3-like (head_dim 32 != d / n_head, GQA, rope base 1e6, eps 1e-6, tied output),
# block 4. Fast-dLLM v2: Qwen2.5-like (GQA, Q/K/V biases, eps 1e-6, untied), block 8 of sub-blocks
# of 4.
CFGS = {
    "sdar": dict(n_layer=2, d_model=64, n_head=4, n_kv_head=2, head_dim=32, ff=160, vocab=300,
                 rope_base=1000000.0, eps=1e-6, context_length=512, block_length=4),
    "fast-dllm-v2": dict(n_layer=2, d_model=64, n_head=4, n_kv_head=2, ff=160, vocab=300,
                         rope_base=1000000.0, eps=1e-6, context_length=512, block_length=8,
                         sub_block_length=4),
}
SEEDS = {"sdar": 5101, "fast-dllm-v2": 5202}
TIED = {"sdar": True, "fast-dllm-v2": False}
DTYPES = ("f32", "bf16", "q8_0")


def make_state_dict(arch: str, cfg: dict, seed: int, tied: bool) -> dict:
    g = np.random.default_rng(seed)
    d, nh, nkv, V, ff = cfg["d_model"], cfg["n_head"], cfg["n_kv_head"], cfg["vocab"], cfg["ff"]
    hd = cfg.get("head_dim", d // nh)

    def lin(*shape, gain=1.0):
        return (g.standard_normal(shape) * gain / math.sqrt(shape[-1])).astype(np.float32)

    def norm_w(n):
        return (1.0 + 0.1 * g.standard_normal(n)).astype(np.float32)

    def bias(n):
        return (0.1 * g.standard_normal(n)).astype(np.float32)

    sd = {"tok_emb.weight": g.standard_normal((V, d)).astype(np.float32)}
    for i in range(cfg["n_layer"]):
        p = f"layers.{i}."
        sd[p + "attn_norm.weight"] = norm_w(d)
        sd[p + "wq.weight"] = lin(nh * hd, d)
        sd[p + "wk.weight"] = lin(nkv * hd, d)
        sd[p + "wv.weight"] = lin(nkv * hd, d)
        if arch == "fast-dllm-v2":
            sd[p + "wq.bias"], sd[p + "wk.bias"], sd[p + "wv.bias"] = (
                bias(nh * hd), bias(nkv * hd), bias(nkv * hd))
        else:
            sd[p + "q_norm.weight"] = norm_w(hd)
            sd[p + "k_norm.weight"] = norm_w(hd)
        sd[p + "wo.weight"] = lin(d, nh * hd)
        sd[p + "ffn_norm.weight"] = norm_w(d)
        sd[p + "w_gate.weight"] = lin(ff, d)
        sd[p + "w_up.weight"] = lin(ff, d)
        sd[p + "w_down.weight"] = lin(d, ff)
    sd["norm.weight"] = norm_w(d)
    if tied:  # embedding rows have norm ~sqrt(d): the final norm weight rescales the logits
        sd["norm.weight"] = (sd["norm.weight"] * 2.0 / math.sqrt(d)).astype(np.float32)
    else:
        sd["lm_head.weight"] = lin(V, d, gain=2.0)
    return sd


def build(out: str, arch: str, tok: dict, tokens) -> list:
    cfg, tied = CFGS[arch], TIED[arch]
    sd = make_state_dict(arch, cfg, SEEDS[arch], tied)
    entries = []
    for dt in DTYPES:
        fname = f"{arch}-tiny.gguf" if dt == "f32" else f"{arch}-tiny-{dt}.gguf"
        path = os.path.join(out, fname)
        exb.export_block(sd, cfg, tok, path, arch, dtype=dt, name=fname[:-5])
        want = exb.roundtrip_block_state_dict(sd, dt)
        r = gr.GGUFReader(path)  # the file holds exactly the round-tripped weights, HF layout
        assert np.array_equal(r.tensor("blk.1.attn_q.weight"), want["layers.1.wq.weight"])
        assert os.path.getsize(path) < 1 << 20
        with torch.no_grad():
            logits = reference_forward_block(want, cfg, tokens, arch).numpy().astype(np.float32)
        lf = fname[:-5] + ".logits.f32"
        logits.astype("<f4").tofile(os.path.join(out, lf))
        entries.append({
            "file": fname, "arch": arch, "weight_type": dt, "config": cfg, "tied_output": tied,
            "shift_logits": arch == "fast-dllm-v2", "seed": SEEDS[arch],
            "tokens": [int(t) for t in tokens], "n_vocab": cfg["vocab"], "logits": lf,
            "mask_token_id": tok["mask"], "ref_std": float(logits.std()),
            "ref_max_abs": float(np.abs(logits).max())})
        print(f"{fname:28s} {os.path.getsize(path):8d} B  std {logits.std():.3f}")
    return entries


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "block")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    tok = ex.synthetic_tokenizer(300, "dream")
    m = tok["mask"]
    rng = np.random.default_rng(77)
    tokens = [tok["tokens"].index("<|im_start|>")] + [int(t) for t in rng.integers(0, 290, 57)]
    tokens += [m] * 10 + [46, tok["eot"]]  # a masked block or two, then an end
    assert len(tokens) == 70
    manifest = {"generator": "tools/reference/make_block_golden.py",
                "reference": "tools/reference/reference_block.py (torch float32, block-causal "
                             "mask, NEOX RoPE) on the weights as stored in each file",
                "logits_format": "raw little-endian float32, row-major [n_tokens][n_vocab], "
                                 "unshifted rows",
                "models": build(out, "sdar", tok, tokens) + build(out, "fast-dllm-v2", tok,
                                                                  tokens)}
    with open(os.path.join(out, "block_golden.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
