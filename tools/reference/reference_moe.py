"""Independent float32 PyTorch reference forward for LLaDA-MoE and RND1 (bidirectional, no cache).

Written from the model definition (HF LLaDA-MoE / llama.cpp's llada-moe graph), on the state dict
of tools/gguf_py/export_moe.py, not from a GGUF file:
  attention: RMSNorm -> Q, K, V -> per-head RMSNorm of Q and K (weights [head_dim]) -> half-split
  ("rotate_half") RoPE -> softmax(QK^T / sqrt(hd)) V -> output projection, residual;
  MoE: RMSNorm -> router logits -> softmax over all experts -> top-k probabilities (renormalised
  to sum 1 only if `renormalise`; LLaDA-MoE does not) -> sum_j p_j * SwiGLU expert_j(h), residual.
Every expert is computed on every row here (dense, tiny models only) and the chosen ones are
gathered, so the reference shares nothing with the engine's grouping by expert.
"""
from __future__ import annotations

import torch

from reference_forward import _t, attention_out, output_logits, rms_norm, rope_cos_sin, rotate_half


def moe_ffn(h: torch.Tensor, router: torch.Tensor, gate: torch.Tensor, up: torch.Tensor,
            down: torch.Tensor, k: int, renormalise: bool):
    """h [n,d]; router [E,d]; gate/up [E,ff,d]; down [E,d,ff]. Returns (out [n,d], margin [n]),
    margin = p_k - p_{k+1} (how far the routing is from a tie)."""
    probs = torch.softmax(h @ router.T, dim=-1)                       # [n, E]
    top, ids = torch.topk(probs, k, dim=-1)                           # [n, k]
    if renormalise:
        top = top / top.sum(-1, keepdim=True)
    g = torch.einsum("nd,efd->enf", h, gate)                          # [E, n, ff]
    u = torch.einsum("nd,efd->enf", h, up)
    y = torch.einsum("enf,edf->end", torch.nn.functional.silu(g) * u, down)  # [E, n, d]
    rows = torch.arange(h.shape[0])
    out = torch.zeros_like(h)
    for j in range(k):
        out = out + top[:, j:j + 1] * y[ids[:, j], rows]
    srt = torch.sort(probs, dim=-1, descending=True).values
    margin = srt[:, k - 1] - srt[:, k] if k < probs.shape[1] else torch.ones(h.shape[0])
    return out, margin


def reference_forward_moe(state_dict: dict, config: dict, tokens, renormalise: bool = False):
    """Returns (logits [n, vocab] float32, the smallest routing margin over all layers)."""
    sd = {k: _t(v) for k, v in state_dict.items()}
    L, d = int(config["n_layer"]), int(config["d_model"])
    nh, nkv = int(config["n_head"]), int(config["n_kv_head"])
    hd, k = int(config.get("head_dim", d // nh)), int(config["n_expert_used"])
    eps, base = float(config["eps"]), float(config.get("rope_base", 10000.0))
    toks = torch.as_tensor(list(tokens), dtype=torch.long)
    n = toks.numel()
    cos, sin = rope_cos_sin(n, hd, base)
    cos, sin = cos[:, None, :], sin[:, None, :]                                # [n,1,hd]
    min_margin = 1.0
    x = sd["tok_emb.weight"][toks]                                             # [n, d]
    for i in range(L):
        p = f"layers.{i}."
        h = rms_norm(x, sd[p + "attn_norm.weight"], eps)
        q = rms_norm((h @ sd[p + "wq.weight"].T).view(n, nh, hd), sd[p + "q_norm.weight"], eps)
        kk = rms_norm((h @ sd[p + "wk.weight"].T).view(n, nkv, hd), sd[p + "k_norm.weight"], eps)
        v = (h @ sd[p + "wv.weight"].T).view(n, nkv, hd)
        q = q * cos + rotate_half(q) * sin
        kk = kk * cos + rotate_half(kk) * sin
        x = x + attention_out(q, kk, v, nh // nkv, hd, sd[p + "wo.weight"])
        h = rms_norm(x, sd[p + "ffn_norm.weight"], eps)
        y, margin = moe_ffn(h, sd[p + "router.weight"], sd[p + "exp_gate.weight"],
                            sd[p + "exp_up.weight"], sd[p + "exp_down.weight"], k, renormalise)
        min_margin = min(min_margin, float(margin.min()))
        x = x + y
    return output_logits(x, sd, eps), min_margin
