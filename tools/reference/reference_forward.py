"""Independent float32 PyTorch reference forward for LLaDA / Dream (bidirectional, no cache).

Written from the model definitions on the HF-convention state dict (see tools/gguf_py/export.py
for the names), NOT from a GGUF file: half-split ("rotate_half") RoPE, no row permutation.
"""
from __future__ import annotations

import math

import numpy as np
import torch


def _t(x) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.detach().to(torch.float32)
    return torch.from_numpy(np.ascontiguousarray(np.asarray(x, dtype=np.float32)))


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def rope_cos_sin(n: int, hd: int, base: float, positions=None):
    pos = torch.arange(n, dtype=torch.float64) if positions is None else \
        torch.as_tensor(positions, dtype=torch.float64)
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))  # [hd/2]
    ang = pos[:, None] * inv[None, :]                                          # [n, hd/2]
    ang = torch.cat([ang, ang], dim=-1)                                        # [n, hd]
    return torch.cos(ang).to(torch.float32), torch.sin(ang).to(torch.float32)


def attention_out(q, k, v, group: int, hd: int, wo: torch.Tensor, allowed=None) -> torch.Tensor:
    """softmax(q k^T / sqrt(hd)) v W_o^T for q [n, nh, hd] and k, v [n, nkv, hd] (GQA: query head
    hq reads kv head hq // group); `allowed` [n, n] bool masks the scores where False."""
    n = q.shape[0]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    att = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
    if allowed is not None:
        att = att.masked_fill(~allowed[None, :, :], float("-inf"))
    att = torch.softmax(att, dim=-1)
    o = torch.einsum("hqk,khd->qhd", att, v).reshape(n, q.shape[1] * hd)
    return o @ wo.T


def ffn_residual(x: torch.Tensor, sd: dict, p: str, eps: float) -> torch.Tensor:
    """x + W_down(silu(W_gate h) * W_up h) with h = RMSNorm(x) (layer prefix p)."""
    h = rms_norm(x, sd[p + "ffn_norm.weight"], eps)
    g = h @ sd[p + "w_gate.weight"].T
    u = h @ sd[p + "w_up.weight"].T
    return x + (torch.nn.functional.silu(g) * u) @ sd[p + "w_down.weight"].T


def output_logits(x: torch.Tensor, sd: dict, eps: float) -> torch.Tensor:
    """RMSNorm(x) W_head^T (the embedding when the head is tied)."""
    x = rms_norm(x, sd["norm.weight"], eps)
    head = sd["lm_head.weight"] if "lm_head.weight" in sd else sd["tok_emb.weight"]
    return x @ head.T


def reference_forward(state_dict: dict, config: dict, tokens, arch: str = "llada",
                      positions=None) -> torch.Tensor:
    """Returns logits [n_tokens, vocab] (float32). For Dream these are the raw rows
    (row p is the model's output at position p; Dream's sampler uses row p-1 for position p)."""
    sd = {k: _t(v) for k, v in state_dict.items()}
    L, d = int(config["n_layer"]), int(config["d_model"])
    nh, nkv = int(config["n_head"]), int(config["n_kv_head"])
    hd = int(config.get("head_dim", d // nh))
    eps, base = float(config["eps"]), float(config.get("rope_base", 10000.0))
    group = nh // nkv
    toks = torch.as_tensor(list(tokens), dtype=torch.long)
    n = toks.numel()
    cos, sin = rope_cos_sin(n, hd, base, positions)
    cos, sin = cos[:, None, :], sin[:, None, :]                                # [n,1,hd]

    x = sd["tok_emb.weight"][toks]                                             # [n, d]
    for i in range(L):
        p = f"layers.{i}."
        h = rms_norm(x, sd[p + "attn_norm.weight"], eps)
        q = h @ sd[p + "wq.weight"].T
        k = h @ sd[p + "wk.weight"].T
        v = h @ sd[p + "wv.weight"].T
        if arch == "dream":
            q = q + sd[p + "wq.bias"]
            k = k + sd[p + "wk.bias"]
            v = v + sd[p + "wv.bias"]
        q = q.view(n, nh, hd)
        k = k.view(n, nkv, hd)
        v = v.view(n, nkv, hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        x = x + attention_out(q, k, v, group, hd, sd[p + "wo.weight"])          # no mask
        x = ffn_residual(x, sd, p, eps)
    return output_logits(x, sd, eps)
