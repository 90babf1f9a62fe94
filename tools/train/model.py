"""Tiny LLaDA-architecture masked diffusion LM (bidirectional LLaMA-like).

state_dict names (honoured by tools/gguf_py/export.py export_llada):
  tok_emb.weight [V,d]; layers.{i}.attn_norm.weight [d]; layers.{i}.wq.weight [H*hd,d];
  layers.{i}.wk.weight [Hkv*hd,d]; layers.{i}.wv.weight [Hkv*hd,d]; layers.{i}.wo.weight [d,H*hd];
  layers.{i}.ffn_norm.weight [d]; layers.{i}.w_gate.weight [ff,d]; layers.{i}.w_up.weight [ff,d];
  layers.{i}.w_down.weight [d,ff]; norm.weight [d]; lm_head.weight [V,d]
RoPE: HF/LLaMA half-split rotate_half, base rope_base. No causal mask. Logits not shifted.
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


def default_config(vocab):
    return {"n_layer": 8, "d_model": 256, "n_head": 4, "n_kv_head": 4, "ff": 704,
            "vocab": vocab, "rope_base": 10000.0, "eps": 1e-5, "context_length": 1024}


def add_shape_args(ap):
    """--layers / --d / --heads / --ff of a small model (the probes' default: 4 layers, d 128, 1.24M params)."""
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=352)


def shape_of(args):
    """The config entries add_shape_args' options set (no GQA: n_kv_head = n_head)."""
    return dict(n_layer=args.layers, d_model=args.d, n_head=args.heads, n_kv_head=args.heads, ff=args.ff)


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, H, Hk = c["d_model"], c["n_head"], c["n_kv_head"]
        hd = d // H
        self.H, self.Hk, self.hd = H, Hk, hd
        self.attn_norm = RMSNorm(d, c["eps"])
        self.wq = nn.Linear(d, H * hd, bias=False)
        self.wk = nn.Linear(d, Hk * hd, bias=False)
        self.wv = nn.Linear(d, Hk * hd, bias=False)
        self.wo = nn.Linear(H * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, c["eps"])
        self.w_gate = nn.Linear(d, c["ff"], bias=False)
        self.w_up = nn.Linear(d, c["ff"], bias=False)
        self.w_down = nn.Linear(c["ff"], d, bias=False)

    def forward(self, x, cos, sin, bias, kv_out=None, att_take=None, att_out=None):
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.H, self.hd).transpose(1, 2)
        k = self.wk(h).view(B, T, self.Hk, self.hd).transpose(1, 2)
        v = self.wv(h).view(B, T, self.Hk, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if kv_out is not None:
            kv_out.append((k, v))
        if self.Hk != self.H:
            rep = self.H // self.Hk
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        att = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))
        if bias is not None:
            att = att + bias.to(att.dtype)
        # softmax in the compute dtype (bf16 under autocast): keeps the [B,H,T,T]
        # buffers small (glibc mmaps+faults every tensor > 32 MB on each step)
        att = torch.softmax(att, dim=-1).to(v.dtype)
        o = torch.matmul(att, v)  # [B,H,T,hd]
        if att_take is not None:
            # attention supervision (training only): the probabilities att[b, h, q, k] [N] at the
            # given (head, row, query, key) index tensors, and those heads' outputs [N,hd] there
            hh, bb, qq, kk = att_take
            att_out.append(att[bb, hh, qq, kk].float())
            att_out.append(o[bb, hh, qq].float())
        o = o.transpose(1, 2).reshape(B, T, self.H * self.hd)
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


def load_checkpoint(path, map_location=None, trainer=False):
    """A checkpoint of the tooling (train.py's dict of model and optimizer state, config, step;
    or a bare state_dict). PyTorch >= 2.6 unpickles only tensors unless told weights_only=False,
    and these files hold ints, floats and strings beside them. A missing, damaged or foreign file
    ends the program with a one-line message; `trainer=True` also requires train.py's dict (the
    model's config and weights), which export and check_engine need."""
    if not os.path.isfile(path):
        raise SystemExit("no checkpoint at %s (train.py writes ckpt/latest.pt; import_gguf.py makes one "
                         "from a GGUF)" % path)
    try:
        ck = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:  # torch raises pickle, zip and runtime errors for a bad file
        raise SystemExit("cannot read checkpoint %s: not a PyTorch checkpoint, or damaged (%s: %s)"
                         % (path, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    if trainer and not (isinstance(ck, dict) and isinstance(ck.get("config"), dict) and "model" in ck):
        raise SystemExit("%s is not a train.py checkpoint (it has no 'config' and 'model'; a bare "
                         "state_dict cannot be exported or checked)" % path)
    return ck


class LLaDA(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = dict(c)
        self.tok_emb = nn.Embedding(c["vocab"], c["d_model"])
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["n_layer"])])
        self.norm = RMSNorm(c["d_model"], c["eps"])
        self.lm_head = nn.Linear(c["d_model"], c["vocab"], bias=False)
        hd = c["d_model"] // c["n_head"]
        inv = 1.0 / (c["rope_base"] ** (torch.arange(0, hd, 2).float() / hd))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.apply(self._init)
        for n, p in self.named_parameters():
            if n.endswith("wo.weight") or n.endswith("w_down.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * c["n_layer"]))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, ids, key_mask=None, select=None, iso=None, kv_layers=0, kv_out=None, att_take=None,
                att_out=None):
        """ids [B,T]; key_mask [B,T] bool (True = real token) or None.
        select: optional [B,T] bool; then only logits of those positions ([N,V]) are returned.
        iso: optional (plen [B] long, depth [B] long): in layers l < depth[b] the first plen[b]
        tokens of row b (its shared prefix) attend only to each other, i.e. they are computed as
        from the prefix alone (what BiCache's cached forward of depth[b] feeds the request).
        kv_layers / kv_out: append the post-RoPE (k, v) [B,Hk,T,hd] of layers < kv_layers to kv_out.
        att_take / att_out: {layer: (head, row, query, key) index tensors [N]}: append (layer, the
        attention probabilities [N] at those indices, the heads' outputs [N,hd] at those queries)
        to att_out (attention supervision)."""
        B, T = ids.shape
        pos = torch.arange(T, device=ids.device).float()
        fr = torch.outer(pos, self.inv_freq)
        emb = torch.cat((fr, fr), dim=-1)
        cos, sin = emb.cos()[None, None], emb.sin()[None, None]
        bias = None
        if key_mask is not None:
            bias = torch.zeros(B, 1, 1, T)
            bias.masked_fill_(~key_mask[:, None, None, :], float("-inf"))
        x = self.tok_emb(ids)
        if key_mask is not None and bool(key_mask.all()):
            bias = None
        iso_mask = None
        if iso is not None:
            plen, depth = iso
            ar = torch.arange(T)
            # [B,1,T,T]: query in the prefix, key outside it
            iso_mask = ((ar[None, :, None] < plen[:, None, None]) & (ar[None, None, :] >= plen[:, None, None]))[:, None]
        for i, l in enumerate(self.layers):
            b = bias
            if iso_mask is not None and bool((depth > i).any()):
                m = iso_mask & (depth > i)[:, None, None, None]
                b = torch.zeros(B, 1, T, T) if bias is None else bias.expand(B, 1, T, T).clone()
                b.masked_fill_(m, float("-inf"))
            take = att_take.get(i) if att_take else None
            probs = [] if take is not None else None
            x = l(x, cos, sin, b, kv_out if i < kv_layers else None, take, probs)
            if take is not None:
                att_out.append((i, probs[0], probs[1]))
        if select is not None:
            x = x[select]
        return self.lm_head(self.norm(x))
