#!/usr/bin/env python3
"""Write golden dequantisation fixtures for the ggml block formats bicache reads.

For each type, tests/data/quant/<TYPE>.blocks holds raw block bytes (512 values: 2 super-blocks
of 256 or 16 blocks of 32) and <TYPE>.f32 the float32 little-endian values that an independent
implementation, llama.cpp's gguf-py (gguf/quants.py, numpy, float32 arithmetic), dequantises
them to. gguf-py is only imported from the checkout given with --gguf-py; nothing of it is copied.

  /usr/bin/python3 tools/reference/make_quant_golden.py --gguf-py /tmp/llama.cpp/gguf-py \
      [--out tests/data/quant] [--seed 20260521]

Blocks: random bytes everywhere, then every f16 scale field (d, dmin, m) overwritten with a
finite value of magnitude in [1e-3, 0.5] (about a quarter negative), so no NaN/inf appears.
Block 0's quant bytes (everything but the f16 fields) are all 0x00 and block 1's all 0xFF.
Deterministic for a given seed.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

# type name -> (ggml type id, elements per block, bytes per block, byte offsets of f16 scales)
TYPES = {
    "Q4_0": (2, 32, 18, [0]),
    "Q4_1": (3, 32, 20, [0, 2]),
    "Q5_0": (6, 32, 22, [0]),
    "Q5_1": (7, 32, 24, [0, 2]),
    "Q8_0": (8, 32, 34, [0]),
    "Q2_K": (10, 256, 84, [80, 82]),       # scales[16] qs[64] d dmin
    "Q3_K": (11, 256, 110, [108]),         # hmask[32] qs[64] scales[12] d
    "Q4_K": (12, 256, 144, [0, 2]),        # d dmin scales[12] qs[128]
    "Q5_K": (13, 256, 176, [0, 2]),        # d dmin scales[12] qh[32] qs[128]
    "Q6_K": (14, 256, 210, [208]),         # ql[128] qh[64] scales[16] d
    "IQ4_NL": (20, 32, 18, [0]),           # d qs[16]
    "IQ4_XS": (23, 256, 136, [0]),         # d scales_h(u16) scales_l[4] qs[128]
}
N_VALUES = 512


def make_blocks(name: str, rng: np.random.Generator) -> np.ndarray:
    _, be, bb, f16_offsets = TYPES[name]
    nb = N_VALUES // be
    blocks = rng.integers(0, 256, size=(nb, bb), dtype=np.uint8)
    blocks[0, :] = 0x00
    blocks[1, :] = 0xFF
    for off in f16_offsets:
        mag = np.exp(rng.uniform(np.log(1e-3), np.log(0.5), size=nb))
        sign = np.where(rng.uniform(size=nb) < 0.25, -1.0, 1.0)
        h = (mag * sign).astype(np.float16)
        assert np.all(np.isfinite(h))
        blocks[:, off:off + 2] = h.view(np.uint8).reshape(nb, 2)
    return blocks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf-py", required=True, help="gguf-py folder of a llama.cpp checkout")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "..", "tests", "data", "quant"))
    ap.add_argument("--seed", type=int, default=20260521)
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(a.gguf_py))
    import gguf  # noqa: E402  (the checkout's, run as an oracle)
    from gguf import quants  # noqa: E402

    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    for name, (tid, be, bb, _) in TYPES.items():
        qt = gguf.GGMLQuantizationType(tid)
        assert qt.name == name, (qt.name, name)
        assert tuple(gguf.GGML_QUANT_SIZES[qt]) == (be, bb), name
        blocks = make_blocks(name, rng)
        values = quants.dequantize(blocks.reshape(-1), qt)
        values = np.asarray(values, dtype=np.float32).reshape(-1)
        assert values.size == N_VALUES, (name, values.size)
        assert np.all(np.isfinite(values)), name
        blocks.tofile(os.path.join(a.out, f"{name}.blocks"))
        values.astype("<f4").tofile(os.path.join(a.out, f"{name}.f32"))
        print(f"{name}: {blocks.shape[0]} blocks x {bb} B, max |x| {np.abs(values).max():.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
