"""Independent PyTorch float32 forward of LLaDA2.x (BailingMoeV2 weights, block-causal), written
from the published model (inclusionAI's modeling_llada2_moe.py and config.json as read for
docs/model-formats.md), not from bicache or llama.cpp code. Used by make_llada2_golden.py.

One decoder layer i, x: [n, d]:
  h = RMSNorm(x) * input_layernorm
  qkv = h @ query_key_value^T, split per token into nh query heads, nkv key heads, nkv value heads
  q, k = RMSNorm over each head's hd values * query_layernorm / key_layernorm
  RoPE on the first rope_dim = hd * partial_rotary_factor values of each head, rotate_half
  ("NEOX") within them, inv_freq = base^(-2j/rope_dim); the other values pass
  attention: softmax(q k^T / sqrt(hd) + block-causal mask) v, query head j reads kv head j//(nh/nkv)
  x = x + (attention output) @ dense^T
  h = RMSNorm(x) * post_attention_layernorm
  i < first_k_dense_replace: x = x + down(silu(gate h) * up h)
  else: s = sigmoid(h @ gate^T) (float32); choice = s + expert_bias; groups of E/n_group
        experts scored by the sum of their two best choice values; the topk_group best groups;
        the top-k choice values inside them; weights = s of those experts / (their sum + 1e-20)
        (norm_topk_prob) * routed_scaling_factor; x = x + sum_k w_k expert_k(h) + shared(h)
logits = RMSNorm(x) * norm @ lm_head^T (unshifted: row p predicts position p).
"""
from __future__ import annotations

import numpy as np
import torch


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float32))


def bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).to(torch.float32)


def mm(a: torch.Tensor, w: torch.Tensor, probe: bool) -> torch.Tensor:
    """a @ w^T in float32; with `probe`, both operands first rounded to bfloat16 (what an engine
    computing with bf16 operands sees: used only to measure how far rounding moves the router's
    scores, never for the reference logits)."""
    return bf16(a) @ bf16(w).T if probe else a @ w.T


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def partial_rope(x: torch.Tensor, pos: torch.Tensor, rope_dim: int, base: float) -> torch.Tensor:
    """x: [heads, n, hd]; only the first rope_dim values of each head turn."""
    inv = 1.0 / (base ** (torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim))
    ang = pos.to(torch.float64)[:, None] * inv[None, :]          # [n, rope_dim/2]
    emb = torch.cat((ang, ang), dim=-1)                           # [n, rope_dim]
    cos, sin = emb.cos().float(), emb.sin().float()
    r, rest = x[..., :rope_dim], x[..., rope_dim:]
    return torch.cat((r * cos + rotate_half(r) * sin, rest), dim=-1)


def block_causal_bias(n: int, block: int) -> torch.Tensor:
    """0 where query i may see key j (j // block <= i // block), -inf elsewhere: [n, n]."""
    i = torch.arange(n)[:, None] // block
    j = torch.arange(n)[None, :] // block
    return torch.where(j <= i, 0.0, float("-inf"))


def route(h: torch.Tensor, gate_w: torch.Tensor, bias: torch.Tensor, hc: dict):
    """BailingMoeV2's gate: (ids [n, k], weights [n, k], margin, choice [n, E]) where margin is
    the smallest gap, over rows, between a chosen and an unchosen candidate (group or expert):
    how far a rounding would have to move a score to change the choice. The router itself runs
    in float32, as the published gate does."""
    E, k = int(hc["num_experts"]), int(hc["num_experts_per_tok"])
    G, Gu = int(hc.get("n_group", 1)), int(hc.get("topk_group", 1))
    s = torch.sigmoid(h @ gate_w.T)                               # [n, E]
    choice = s + bias
    grouped = choice.view(-1, G, E // G)
    group_score = grouped.topk(2, dim=-1).values.sum(-1)          # [n, G]
    gs = group_score.sort(dim=-1, descending=True).values
    margin = float("inf") if Gu == G else float((gs[:, Gu - 1] - gs[:, Gu]).min())
    keep = torch.zeros_like(group_score).scatter_(1, group_score.topk(Gu, dim=-1).indices, 1.0)
    allowed = keep[:, :, None].expand(-1, G, E // G).reshape(-1, E) > 0
    masked = choice.masked_fill(~allowed, float("-inf"))
    top = masked.topk(k, dim=-1)
    ms = masked.sort(dim=-1, descending=True).values
    margin = min(margin, float((ms[:, k - 1] - ms[:, k]).min()))
    w = s.gather(1, top.indices)
    if hc.get("norm_topk_prob", True) and k > 1:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return top.indices, w * float(hc.get("routed_scaling_factor", 1.0)), margin, choice


def swiglu_mlp(h, gate, up, down, probe=False):
    return mm(torch.nn.functional.silu(mm(h, gate, probe)) * mm(h, up, probe), down, probe)


def reference_forward_llada2(sd: dict, hc: dict, tokens, block_length: int, probe=False):
    """Logits [n, V] (float32), the smallest routing margin over every routed layer, and the
    router's choice scores of each routed layer. `probe` rounds every projection's operands to
    bf16 (see mm) to measure the choice scores' sensitivity; the reference runs without it."""
    W = {k: _t(v) for k, v in sd.items()}
    d, nh, nkv = int(hc["hidden_size"]), int(hc["num_attention_heads"]), int(hc["num_key_value_heads"])
    hd = int(hc.get("head_dim") or d // nh)
    rd = int(hd * float(hc.get("partial_rotary_factor", 1.0)))
    eps, base = float(hc["rms_norm_eps"]), float(hc.get("rope_theta", 10000.0))
    E = int(hc["num_experts"])
    toks = torch.as_tensor(list(tokens), dtype=torch.long)
    n = toks.numel()
    pos = torch.arange(n)
    x = W["model.word_embeddings.weight"][toks]
    mask = block_causal_bias(n, block_length)
    margin = float("inf")
    choices = []
    for i in range(int(hc["num_hidden_layers"])):
        p = f"model.layers.{i}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        qkv = mm(h, W[p + "attention.query_key_value.weight"], probe).view(n, nh + 2 * nkv, hd)
        q, k, v = qkv.split([nh, nkv, nkv], dim=1)
        q = rms_norm(q, W[p + "attention.query_layernorm.weight"], eps).transpose(0, 1)
        k = rms_norm(k, W[p + "attention.key_layernorm.weight"], eps).transpose(0, 1)
        v = v.transpose(0, 1)
        q, k = partial_rope(q, pos, rd, base), partial_rope(k, pos, rd, base)
        rep = nh // nkv
        k, v = k.repeat_interleave(rep, dim=0), v.repeat_interleave(rep, dim=0)
        att = torch.softmax(q @ k.transpose(1, 2) / hd ** 0.5 + mask, dim=-1) @ v   # [nh, n, hd]
        x = x + mm(att.transpose(0, 1).reshape(n, nh * hd), W[p + "attention.dense.weight"], probe)
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        m = p + "mlp."
        if i < int(hc["first_k_dense_replace"]):
            x = x + swiglu_mlp(h, W[m + "gate_proj.weight"], W[m + "up_proj.weight"],
                               W[m + "down_proj.weight"], probe)
            continue
        ids, wts, mg, choice = route(h, W[m + "gate.weight"], W[m + "gate.expert_bias"], hc)
        margin = min(margin, mg)
        choices.append(choice)
        y = torch.zeros_like(x)
        for e in range(E):
            rows, slot = (ids == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            out = swiglu_mlp(h[rows], W[m + f"experts.{e}.gate_proj.weight"],
                             W[m + f"experts.{e}.up_proj.weight"],
                             W[m + f"experts.{e}.down_proj.weight"], probe)
            y.index_add_(0, rows, out * wts[rows, slot][:, None])
        y = y + swiglu_mlp(h, W[m + "shared_experts.gate_proj.weight"],
                           W[m + "shared_experts.up_proj.weight"],
                           W[m + "shared_experts.down_proj.weight"], probe)
        x = x + y
    logits = mm(rms_norm(x, W["model.norm.weight"], eps), W["lm_head.weight"], probe)
    return logits, margin, choices
