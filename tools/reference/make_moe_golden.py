#!/usr/bin/env python3
"""Tiny seeded random-weight llada-moe and rnd1 GGUF files plus reference logits, in tests/data/moe/.

Run:  /usr/bin/python3 tools/reference/make_moe_golden.py [out_dir]
Writes llada-moe-tiny{,-f16,-bf16,-q8_0}.gguf and rnd1-tiny.gguf (head_dim 32 != d/n_head, tied output,
top-2 of 4 experts renormalised), their <name>.logits.f32 (raw little-endian float32, row-major
[n_tokens][n_vocab], unshifted rows, from tools/reference/reference_moe.py on the weights as
stored) and moe_golden.json (the manifest, read by tests/model_moe_test.cpp). Deterministic: each
model's seed is the first from its start up whose routing is at least MIN_MARGIN from a tie at
every row and layer in every file, so the engine's bf16 rounding cannot flip an expert choice.
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
import export_moe as exm  # noqa: E402
import gguf_reader as gr  # noqa: E402
from reference_moe import reference_forward_moe  # noqa: E402

CFG = dict(n_layer=2, d_model=64, n_head=4, n_kv_head=2, vocab=300, rope_base=10000.0,
           eps=1e-5, context_length=512, n_expert=4, n_expert_used=2, ff_exp=32)
RND1_CFG = dict(n_layer=2, d_model=64, n_head=4, n_kv_head=2, head_dim=32, vocab=300,
                rope_base=1000000.0, eps=1e-6, context_length=512, n_expert=4, n_expert_used=2,
                ff_exp=32)
MIN_MARGIN = 0.02


def make_state_dict(cfg: dict, seed: int, tied: bool = False) -> dict:
    g = np.random.default_rng(seed)
    d, nh, nkv, V = cfg["d_model"], cfg["n_head"], cfg["n_kv_head"], cfg["vocab"]
    E, ff, hd = cfg["n_expert"], cfg["ff_exp"], cfg.get("head_dim", d // nh)

    def lin(*shape, gain=1.0):
        return (g.standard_normal(shape) * gain / math.sqrt(shape[-1])).astype(np.float32)

    def norm_w(n):
        return (1.0 + 0.1 * g.standard_normal(n)).astype(np.float32)

    sd = {"tok_emb.weight": g.standard_normal((V, d)).astype(np.float32)}
    for i in range(cfg["n_layer"]):
        p = f"layers.{i}."
        sd[p + "attn_norm.weight"] = norm_w(d)
        sd[p + "wq.weight"] = lin(nh * hd, d)
        sd[p + "wk.weight"] = lin(nkv * hd, d)
        sd[p + "wv.weight"] = lin(nkv * hd, d)
        sd[p + "q_norm.weight"] = norm_w(hd)
        sd[p + "k_norm.weight"] = norm_w(hd)
        sd[p + "wo.weight"] = lin(d, nh * hd)
        sd[p + "ffn_norm.weight"] = norm_w(d)
        sd[p + "router.weight"] = lin(E, d, gain=3.0)  # confident routing: clear top-k gaps
        sd[p + "exp_gate.weight"] = lin(E, ff, d)
        sd[p + "exp_up.weight"] = lin(E, ff, d)
        sd[p + "exp_down.weight"] = lin(E, d, ff)
    sd["norm.weight"] = norm_w(d)
    if tied:  # embedding rows have norm ~sqrt(d): the final norm weight rescales the logits
        sd["norm.weight"] = (sd["norm.weight"] * 2.0 / math.sqrt(d)).astype(np.float32)
    else:
        sd["lm_head.weight"] = lin(V, d, gain=2.0)
    return sd


def references(sd: dict, cfg: dict, tokens, dtypes, renorm: bool) -> tuple[dict, float]:
    out, margin = {}, 1.0
    for dt in dtypes:
        with torch.no_grad():
            logits, m = reference_forward_moe(exm.roundtrip_moe_state_dict(sd, dt), cfg, tokens,
                                              renorm)
        out[dt], margin = logits.numpy().astype(np.float32), min(margin, m)
    return out, margin


def build(out: str, arch: str, cfg: dict, tok: dict, tokens, dtypes, seed: int, tied: bool,
          extra_dtypes=()):
    """Writes one architecture's files; returns their manifest entries. The seed search covers
    `dtypes`; `extra_dtypes` (block-quantized variants) reuse the seed found, their margin checked."""
    renorm = arch == "rnd1"
    while True:
        sd = make_state_dict(cfg, seed, tied)
        logits, margin = references(sd, cfg, tokens, dtypes, renorm)
        if margin >= MIN_MARGIN:
            break
        seed += 1
    if extra_dtypes:
        more, m2 = references(sd, cfg, tokens, extra_dtypes, renorm)
        assert m2 >= MIN_MARGIN, (arch, extra_dtypes, m2)
        logits.update(more)
        margin = min(margin, m2)
        dtypes = tuple(dtypes) + tuple(extra_dtypes)
    entries = []
    for dt in dtypes:
        fname = f"{arch}-tiny.gguf" if dt == "f32" else f"{arch}-tiny-{dt}.gguf"
        path = os.path.join(out, fname)
        exm.export_llada_moe(sd, cfg, tok, path, dtype=dt, name=fname[:-5], arch=arch)
        r = gr.GGUFReader(path)  # the file holds exactly the round-tripped weights, HF layout
        want = exm.roundtrip_moe_state_dict(sd, dt)
        assert np.array_equal(r.tensor("blk.1.ffn_down_exps.weight"),
                              want["layers.1.exp_down.weight"])
        assert np.array_equal(r.tensor("blk.0.attn_k.weight"), want["layers.0.wk.weight"])
        assert r.tensors["blk.0.ffn_gate_exps.weight"].ne == [cfg["d_model"], cfg["ff_exp"],
                                                             cfg["n_expert"]]
        assert os.path.getsize(path) < 1 << 20
        lf = fname[:-5] + ".logits.f32"
        logits[dt].astype("<f4").tofile(os.path.join(out, lf))
        entries.append({
            "file": fname, "arch": arch, "weight_type": dt, "config": cfg,
            "tied_output": tied, "renormalised": renorm, "shift_logits": arch == "rnd1",
            "seed": seed, "min_routing_margin": margin,
            "tokens": [int(t) for t in tokens], "n_vocab": cfg["vocab"], "logits": lf,
            "mask_token_id": tok["mask"], "ref_std": float(logits[dt].std()),
            "ref_max_abs": float(np.abs(logits[dt]).max())})
        print(f"{fname:26s} {os.path.getsize(path):8d} B  std {logits[dt].std():.3f}  "
              f"seed {seed}  smallest routing margin {margin:.4f}")
    return entries


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "moe")
    os.makedirs(out, exist_ok=True)
    tok = ex.synthetic_tokenizer(CFG["vocab"], "llada")
    m = tok["mask"]
    tokens = [tok["bos"], 72, 101, 108, 256, 257, 32, 260, m, m, m, m, 33, tok["eos"]]
    qtok = ex.synthetic_tokenizer(RND1_CFG["vocab"], "dream")
    qm = qtok["mask"]
    qtokens = [qtok["tokens"].index("<|im_start|>"), 85, 115, 256, 270, 10, qm, qm, qm, 46,
               qtok["eot"]]
    manifest = {"generator": "tools/reference/make_moe_golden.py",
                "reference": "tools/reference/reference_moe.py (torch float32) on the weights as "
                             "stored in each file",
                "logits_format": "raw little-endian float32, row-major [n_tokens][n_vocab], "
                                 "unshifted rows",
                "models": build(out, "llada-moe", CFG, tok, tokens, ("f32", "f16", "bf16"), 4321,
                                tied=False, extra_dtypes=("q8_0",))
                + build(out, "rnd1", RND1_CFG, qtok, qtokens, ("f32",), 8765, tied=True)}
    with open(os.path.join(out, "moe_golden.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
