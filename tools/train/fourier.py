"""Number tokens that carry their value: fixed Fourier features in the embedding and the output head.

Every number 0-99 is one token in the embedded tokenizer, so with learned embeddings `x + y` is a
table of facts to memorise (docs/model.md, tenth and fourteenth runs). --fourier K (probe_numbers.py,
train.py) holds the last 2K dimensions of the number tokens' rows of tok_emb and lm_head at
cos(2 pi k n / 100), sin(2 pi k n / 100) for K frequencies k. Every result of the suite's arithmetic
lies in 0..99, so x + y and x - y are sums of angles mod 100: the cos/sin of the result are sums of
products of the operands' features, which SwiGLU's product can form, and the output head reads the
angle back as a number. The weights stay plain LLaDA weights (the GGUF export is unchanged).
"""
import math

import torch

# the K frequencies of --fourier K (k / 100 turns per unit): low ones separate far values, high ones
# neighbours; 50 is left out (its sine is 0 at every integer)
FREQS = [1, 2, 3, 4, 5, 7, 10, 13, 17, 23, 29, 37, 41, 47, 11, 19]


def number_ids(tok):
    """[100] token ids of " n" for n = 0..99; ValueError if one of them is not a single token."""
    ids = []
    for n in range(100):
        e = tok.encode(" %d" % n)
        if len(e) != 1:
            raise ValueError("' %d' is %d tokens in this tokenizer; --fourier needs one token per number 0-99" % (n, len(e)))
        ids.append(e[0])
    return torch.tensor(ids)


def fourier_table(k_count, amp):
    """[100, 2K]: cos then sin of 2 pi k n / 100 for the first K of FREQS, times amp."""
    n = torch.arange(100).float()[:, None]
    k = torch.tensor(FREQS[:k_count]).float()[None, :]
    a = 2 * math.pi * n * k / 100
    return amp * torch.cat((a.cos(), a.sin()), dim=1)


class FixedNumberDims:
    """Holds the last 2K columns of tok_emb and lm_head at the Fourier table on the number rows (and,
    with zero_others, at 0 on every other row): apply() after every optimizer step undoes what the
    step and weight decay did there. zero_others=False leaves the other tokens' columns to training
    (a model fine-tuned into this layout keeps what it had there)."""

    def __init__(self, model, nums, k_count, amp, zero_others=True):
        d = model.c["d_model"]
        if not 0 < 2 * k_count < d:
            raise ValueError("--fourier %d needs 2K = %d dimensions, fewer than d_model %d" % (k_count, 2 * k_count, d))
        self.model, self.nums, self.zero_others = model, nums, zero_others
        self.lo = d - 2 * k_count
        self.table = fourier_table(k_count, amp)  # [100, 2K]

    @torch.no_grad()
    def apply(self):
        for w in (self.model.tok_emb.weight, self.model.lm_head.weight):
            if self.zero_others:
                w[:, self.lo:] = 0
            w[self.nums, self.lo:] = self.table.to(w.dtype)
