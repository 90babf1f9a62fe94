"""Independent float32 PyTorch reference forward for the block-diffusion architectures sdar
(Qwen3 layout) and fast-dllm-v2 (Qwen2.5 layout), written from their published model
definitions on the HF-convention state dict (tools/gguf_py/export_block.py names), not from a
GGUF file and not from bicache's C++.

  x = embed(tokens)
  per layer:  h = RMSNorm(x); q, k, v = h W^T (+ bias: fast-dllm-v2)
              sdar: q, k = RMSNorm over each head's head_dim values (q_norm / k_norm)
              q, k rotated with half-split ("rotate_half", NEOX) RoPE at absolute positions
              scores = q k^T / sqrt(hd), masked where block(j) > block(i), block(p) = p // B
              x += softmax(scores) v W_o^T;  x += W_down(silu(W_gate h) * W_up h), h = RMSNorm(x)
  logits = RMSNorm(x) W_head^T     (raw rows: row p is the output at position p; Fast-dLLM v2's
                                    sampler reads row p-1 for position p, SDAR row p)
"""
from __future__ import annotations

import torch

from reference_forward import (_t, attention_out, ffn_residual, output_logits, rms_norm,
                               rope_cos_sin, rotate_half)


def block_causal_mask(n: int, block: int) -> torch.Tensor:
    """[n, n] bool: True where query i may attend to key j (block(j) <= block(i))."""
    blk = torch.arange(n) // block
    return blk[None, :] <= blk[:, None]


def reference_forward_block(state_dict: dict, config: dict, tokens, arch: str) -> torch.Tensor:
    assert arch in ("sdar", "fast-dllm-v2"), arch
    sd = {k: _t(v) for k, v in state_dict.items()}
    L, d = int(config["n_layer"]), int(config["d_model"])
    nh, nkv = int(config["n_head"]), int(config["n_kv_head"])
    hd = int(config.get("head_dim", d // nh))
    eps, base = float(config["eps"]), float(config["rope_base"])
    group = nh // nkv
    toks = torch.as_tensor(list(tokens), dtype=torch.long)
    n = toks.numel()
    cos, sin = rope_cos_sin(n, hd, base)
    cos, sin = cos[:, None, :], sin[:, None, :]                                # [n,1,hd]
    allowed = block_causal_mask(n, int(config["block_length"]))                # [n, n]

    x = sd["tok_emb.weight"][toks]                                             # [n, d]
    for i in range(L):
        p = f"layers.{i}."
        h = rms_norm(x, sd[p + "attn_norm.weight"], eps)
        q = h @ sd[p + "wq.weight"].T
        k = h @ sd[p + "wk.weight"].T
        v = h @ sd[p + "wv.weight"].T
        if arch == "fast-dllm-v2":
            q, k, v = q + sd[p + "wq.bias"], k + sd[p + "wk.bias"], v + sd[p + "wv.bias"]
        q, k, v = q.view(n, nh, hd), k.view(n, nkv, hd), v.view(n, nkv, hd)
        if arch == "sdar":
            q = rms_norm(q, sd[p + "q_norm.weight"], eps)
            k = rms_norm(k, sd[p + "k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        x = x + attention_out(q, k, v, group, hd, sd[p + "wo.weight"], allowed)
        x = ffn_residual(x, sd, p, eps)
    return output_logits(x, sd, eps)
