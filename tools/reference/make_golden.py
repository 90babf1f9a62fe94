#!/usr/bin/env python3
"""Create tiny seeded random-weight LLaDA / Dream GGUF files plus reference logits.

Writes to tests/data/golden/ (by default):
  <model>.gguf, <model>.tokens.json is inside golden.json, <model>.logits.f32 (raw little-endian
  float32, row-major [n_tokens][n_vocab]) and golden.json (the manifest).
Run:  /usr/bin/python3 tools/reference/make_golden.py [out_dir]
Every run is deterministic (fixed seeds) and self-checks the writer, the reader, the Q/K permutation
and the RoPE conventions with an independent numpy forward that reads the GGUF file back.
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
import gguf_reader as gr  # noqa: E402
import gguf_writer as gw  # noqa: E402
from reference_forward import reference_forward  # noqa: E402

LLADA_CFG = dict(n_layer=2, d_model=64, n_head=4, n_kv_head=4, ff=160, vocab=300,
                 rope_base=10000.0, eps=1e-5, context_length=512)
DREAM_CFG = dict(n_layer=2, d_model=64, n_head=4, n_kv_head=2, ff=160, vocab=300,
                 rope_base=1000000.0, eps=1e-6, context_length=512)


# ---- random models ---------------------------------------------------------------------
def make_state_dict(cfg: dict, seed: int, arch: str, tied: bool) -> dict:
    g = np.random.default_rng(seed)
    d, nh, nkv, ff, V = cfg["d_model"], cfg["n_head"], cfg["n_kv_head"], cfg["ff"], cfg["vocab"]
    hd = d // nh

    def lin(out, inp, gain=1.0):
        return (g.standard_normal((out, inp)) * gain / math.sqrt(inp)).astype(np.float32)

    def norm_w(n):
        return (1.0 + 0.1 * g.standard_normal(n)).astype(np.float32)

    sd = {"tok_emb.weight": g.standard_normal((V, d)).astype(np.float32)}
    for i in range(cfg["n_layer"]):
        p = f"layers.{i}."
        sd[p + "attn_norm.weight"] = norm_w(d)
        # larger Q/K gain so attention is not uniform (makes RoPE / permutation errors visible)
        sd[p + "wq.weight"] = lin(nh * hd, d, 2.0)
        sd[p + "wk.weight"] = lin(nkv * hd, d, 2.0)
        sd[p + "wv.weight"] = lin(nkv * hd, d)
        if arch == "dream":
            sd[p + "wq.bias"] = (0.3 * g.standard_normal(nh * hd)).astype(np.float32)
            sd[p + "wk.bias"] = (0.3 * g.standard_normal(nkv * hd)).astype(np.float32)
            sd[p + "wv.bias"] = (0.3 * g.standard_normal(nkv * hd)).astype(np.float32)
        sd[p + "wo.weight"] = lin(d, nh * hd)
        sd[p + "ffn_norm.weight"] = norm_w(d)
        sd[p + "w_gate.weight"] = lin(ff, d)
        sd[p + "w_up.weight"] = lin(ff, d)
        sd[p + "w_down.weight"] = lin(d, ff)
    sd["norm.weight"] = norm_w(d)
    if not tied:
        sd["lm_head.weight"] = lin(V, d, 2.0)
    else:
        # tied head: embedding rows have norm ~sqrt(d); rescale logits via the final norm weight
        sd["norm.weight"] = (sd["norm.weight"] * 2.0 / math.sqrt(d)).astype(np.float32)
    return sd


# ---- independent GGUF-side forward (numpy, llama.cpp conventions) -----------------------
def gguf_forward(path: str, tokens) -> np.ndarray:
    """Forward pass from the GGUF file alone, the way the C++ engine must do it:
    llada -> "normal" RoPE on adjacent pairs (2i, 2i+1); dream -> NEOX RoPE on (i, i+hd/2)."""
    r = gr.GGUFReader(path)
    arch = r.kv["general.architecture"]
    K = lambda k: r.kv[f"{arch}.{k}"]  # noqa: E731
    L, d, nh = K("block_count"), K("embedding_length"), K("attention.head_count")
    nkv = r.kv.get(f"{arch}.attention.head_count_kv", nh)
    eps, base = K("attention.layer_norm_rms_epsilon"), r.kv.get(f"{arch}.rope.freq_base", 1e4)
    hd = d // nh
    T = lambda name: r.tensor(name).astype(np.float64)  # noqa: E731  numpy shape = reversed(ne)
    toks = np.asarray(tokens)
    n = len(toks)
    x = T("token_embd.weight")[toks]
    pos = np.arange(n, dtype=np.float64)
    theta = base ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    ang = pos[:, None] * theta[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]

    def rope(t):  # t [n, heads, hd]
        t = t.copy()
        if arch == "dream":
            a, b = t[..., : hd // 2].copy(), t[..., hd // 2:].copy()
            t[..., : hd // 2], t[..., hd // 2:] = a * c - b * s, a * s + b * c
        else:
            a, b = t[..., 0::2].copy(), t[..., 1::2].copy()
            t[..., 0::2], t[..., 1::2] = a * c - b * s, a * s + b * c
        return t

    def rms(v, w):
        return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps) * w

    for i in range(L):
        b = f"blk.{i}."
        h = rms(x, T(b + "attn_norm.weight"))
        q, k, v = h @ T(b + "attn_q.weight").T, h @ T(b + "attn_k.weight").T, h @ T(b + "attn_v.weight").T
        if b + "attn_q.bias" in r.tensors:
            q, k, v = q + T(b + "attn_q.bias"), k + T(b + "attn_k.bias"), v + T(b + "attn_v.bias")
        q, k, v = rope(q.reshape(n, nh, hd)), rope(k.reshape(n, nkv, hd)), v.reshape(n, nkv, hd)
        o = np.empty((n, nh, hd))
        for hq in range(nh):
            hk = hq // (nh // nkv)
            sc = q[:, hq] @ k[:, hk].T / math.sqrt(hd)
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            sc /= sc.sum(-1, keepdims=True)
            o[:, hq] = sc @ v[:, hk]
        x = x + o.reshape(n, nh * hd) @ T(b + "attn_output.weight").T
        h = rms(x, T(b + "ffn_norm.weight"))
        gt, up = h @ T(b + "ffn_gate.weight").T, h @ T(b + "ffn_up.weight").T
        x = x + (gt / (1 + np.exp(-gt)) * up) @ T(b + "ffn_down.weight").T
    x = rms(x, T("output_norm.weight"))
    head = T("output.weight") if "output.weight" in r.tensors else T("token_embd.weight")
    return x @ head.T


# ---- writer self-test -------------------------------------------------------------------
def writer_selftest(tmp_path: str):
    w = gw.GGUFWriter(alignment=64)
    vals = [("u8", gw.T_UINT8, 200), ("i8", gw.T_INT8, -100), ("u16", gw.T_UINT16, 60000),
            ("i16", gw.T_INT16, -30000), ("u32", gw.T_UINT32, 4000000000), ("i32", gw.T_INT32, -7),
            ("f32", gw.T_FLOAT32, 0.5), ("b", gw.T_BOOL, True), ("s", gw.T_STRING, "héllo"),
            ("u64", gw.T_UINT64, 2 ** 63 + 5), ("i64", gw.T_INT64, -2 ** 40),
            ("f64", gw.T_FLOAT64, 1.0 / 3.0)]
    for k, t, v in vals:
        w.add_kv(k, t, v)
    w.add_array("arr.i32", [1, -2, 3], gw.T_INT32)
    w.add_array("arr.s", ["a", "", "ĠĊ"], gw.T_STRING)
    w.add_array("arr.b", [True, False], gw.T_BOOL)
    w.add_array("arr.f64", [0.25, -1.5], gw.T_FLOAT64)
    w.add_array("arr.nested", [(gw.T_UINT8, [1, 2]), (gw.T_STRING, ["x"])], gw.T_ARRAY)
    rng = np.random.default_rng(0)
    ts = {}
    for name, ty, shape in [("a", gw.GGML_F32, (3, 5)), ("b", gw.GGML_F16, (7,)),
                            ("c", gw.GGML_BF16, (2, 3, 4)), ("d", gw.GGML_Q8_0, (3, 64)),
                            ("e", gw.GGML_Q4_0, (5, 32))]:
        x = rng.standard_normal(shape).astype(np.float32)
        ts[name] = (x, ty)
        w.add_tensor(name, x, ty)
    w.write(tmp_path)
    r = gr.GGUFReader(tmp_path)
    assert r.version == 3 and r.alignment == 64 and r.data_offset % 64 == 0
    for k, t, v in vals:
        got = r.kv[k]
        assert r.kv_types[k][0] == t, k
        assert (abs(got - v) < 1e-7) if t == gw.T_FLOAT32 else got == v, (k, got, v)
    assert r.kv["arr.i32"] == [1, -2, 3] and r.kv["arr.s"] == ["a", "", "ĠĊ"]
    assert r.kv["arr.b"] == [True, False] and r.kv["arr.f64"] == [0.25, -1.5]
    assert r.kv["arr.nested"] == [[1, 2], ["x"]]
    for name, (x, ty) in ts.items():
        ti = r.tensors[name]
        assert ti.ne == list(reversed(x.shape)) and ti.ggml_type == ty and ti.offset % 64 == 0
        got = r.tensor(name)
        tol = {gw.GGML_F32: 0, gw.GGML_F16: 1e-3, gw.GGML_BF16: 1e-2, gw.GGML_Q8_0: 0.03,
               gw.GGML_Q4_0: 0.35}[ty]
        assert np.abs(got - x).max() <= tol * max(1.0, np.abs(x).max()), (name, np.abs(got - x).max())
        assert np.array_equal(got, gw.roundtrip(x, ty))
    # exact-format spot checks
    x = np.zeros(32, np.float32)
    x[0], x[1], x[17] = -2.0, 1.0, 0.5
    q8 = np.frombuffer(gw.quantize_q8_0(x), np.uint8)
    assert q8[:2].view(np.float16)[0] == np.float16(2.0 / 127) and q8[2:].view(np.int8)[0] == -127
    q4 = np.frombuffer(gw.quantize_q4_0(x), np.uint8)
    assert q4[:2].view(np.float16)[0] == np.float16(0.25)          # d = -2 / -8
    assert q4[2] == (0 | (8 << 4))                                  # q[0]=0 (-8), q[16]=8 (0)
    assert q4[3] == (12 | (10 << 4))                                # q[1]=1/0.25+8, q[17]=.5/.25+8
    bf = gw.f32_to_bf16_bits(np.array([1.0, 1.00390625, 1.01171875, -3.0e38], np.float32))
    assert list(bf) == [0x3F80, 0x3F80, 0x3F82, 0xFF62]             # ties to even
    os.remove(tmp_path)


# ---- main -------------------------------------------------------------------------------
def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "golden")
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    writer_selftest(os.path.join(out, "_selftest.gguf"))
    print("writer/reader self-test: ok")

    lsd = make_state_dict(LLADA_CFG, seed=1234, arch="llada", tied=False)
    dsd = make_state_dict(DREAM_CFG, seed=5678, arch="dream", tied=True)
    ltok = ex.synthetic_tokenizer(LLADA_CFG["vocab"], "llada")
    dtok = ex.synthetic_tokenizer(DREAM_CFG["vocab"], "dream")
    lm, dm = ltok["mask"], dtok["mask"]
    llada_tokens = [ltok["bos"], 72, 101, 108, 256, 257, 32, 260, lm, lm, lm, lm, 33, ltok["eos"]]
    dream_tokens = [dtok["tokens"].index("<|im_start|>"), 85, 115, 256, 270, 10, dm, dm, dm, 46,
                    dtok["eot"]]

    jobs = [  # file, arch, sd, cfg, tok, tokens, dtype
        ("llada-tiny.gguf", "llada", lsd, LLADA_CFG, ltok, llada_tokens, "f32"),
        ("llada-tiny-f16.gguf", "llada", lsd, LLADA_CFG, ltok, llada_tokens, "f16"),
        ("llada-tiny-bf16.gguf", "llada", lsd, LLADA_CFG, ltok, llada_tokens, "bf16"),
        ("llada-tiny-q8_0.gguf", "llada", lsd, LLADA_CFG, ltok, llada_tokens, "q8_0"),
        ("llada-tiny-q4_0.gguf", "llada", lsd, LLADA_CFG, ltok, llada_tokens, "q4_0"),
        ("dream-tiny.gguf", "dream", dsd, DREAM_CFG, dtok, dream_tokens, "f32"),
    ]
    manifest = {
        "generator": "tools/reference/make_golden.py",
        "logits_format": "raw little-endian float32, row-major [n_tokens][n_vocab]",
        "logits_rows": "raw, unshifted: row p is the model output at position p for every arch "
                       "(Dream's sampler reads row p-1 for position p; shift_logits tells which)",
        "positions": "0..n_tokens-1, one sequence, full bidirectional attention",
        "reference": "tools/reference/reference_forward.py (torch float32, HF half-split RoPE) on "
                     "the weights as stored in the file (de-quantised where not f32)",
        "models": [],
    }
    for fname, arch, sd, cfg, tok, tokens, dtype in jobs:
        path = os.path.join(out, fname)
        exp = ex.export_llada if arch == "llada" else ex.export_dream
        exp(sd, cfg, tok, path, dtype=dtype, name=fname[:-5])
        sd_file = ex.roundtrip_state_dict(sd, dtype)  # exactly what the file holds (HF layout)
        with torch.no_grad():
            logits = reference_forward(sd_file, cfg, tokens, arch).numpy().astype(np.float32)
        # independent check from the GGUF file alone (llama.cpp RoPE conventions, float64)
        alt = gguf_forward(path, tokens)
        diff = float(np.abs(alt - logits).max())
        assert diff < 1e-3, (fname, diff)
        # the file's tensors must equal the permuted round-tripped weights exactly
        r = gr.GGUFReader(path)
        wq = r.tensor("blk.0.attn_q.weight")
        want = sd_file["layers.0.wq.weight"]
        if arch == "llada":
            want = ex.permute_qk(want, cfg["n_head"])
            assert np.array_equal(ex.unpermute_qk(wq, cfg["n_head"]), sd_file["layers.0.wq.weight"])
        assert np.array_equal(wq, want)
        assert r.tensors["token_embd.weight"].ne == [cfg["d_model"], cfg["vocab"]]
        lf = fname[:-5] + ".logits.f32"
        logits.astype("<f4").tofile(os.path.join(out, lf))
        size = os.path.getsize(path)
        assert size < 1 << 20, (fname, size)
        entry = {
            "file": fname, "arch": arch, "weight_type": dtype,
            "config": cfg, "head_dim": cfg["d_model"] // cfg["n_head"],
            "tied_output": "lm_head.weight" not in sd,
            "shift_logits": arch == "dream",
            "mask_token_id": tok["mask"],
            "tokens": [int(t) for t in tokens], "n_tokens": len(tokens),
            "logits": lf, "n_vocab": cfg["vocab"],
            "ref_max_abs": float(np.abs(logits).max()),
            "ref_mean_abs": float(np.abs(logits).mean()),
            "ref_std": float(logits.std()),
            "ref_argmax": [int(a) for a in logits.argmax(-1)],
            "check_gguf_numpy_forward_max_abs_diff": diff,
        }
        manifest["models"].append(entry)
        print(f"{fname:24s} {size:8d} B  max|logit| {entry['ref_max_abs']:.3f}  "
              f"std {entry['ref_std']:.3f}  gguf-side diff {diff:.2e}")
    # variants from the same weights must agree roughly with the f32 file
    base = np.fromfile(os.path.join(out, "llada-tiny.logits.f32"), "<f4")
    for e in manifest["models"][1:5]:
        other = np.fromfile(os.path.join(out, e["logits"]), "<f4")
        e["max_abs_diff_vs_f32_model"] = float(np.abs(other - base).max())
        print(f"  {e['file']:22s} vs f32 weights: max diff {e['max_abs_diff_vs_f32_model']:.3e}")
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("wrote", os.path.join(out, "golden.json"))


if __name__ == "__main__":
    main()
