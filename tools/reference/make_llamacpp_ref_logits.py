#!/usr/bin/env python3
"""Reference logits for the llama-quantize-written fixtures in tests/data/llamacpp/.

For every random-llada-*.gguf there, runs make_golden.gguf_forward (float64 numpy forward from
the GGUF file alone) on weights dequantised by llama.cpp's gguf-py (gguf/quants.py, imported from
the checkout given with --gguf-py, run as an offline oracle; nothing of it is copied), and writes
<file>.ref-logits.f32 (float32 [n_tokens][n_vocab]) plus manifest.json: the token sequence, each
file's tensor types and the measured distances between the reference logits, llama.cpp's own
logits (<file>.llama-logits.f32, if present) and the unquantised original's reference logits.
Files with a tensor type gguf-py cannot dequantise or bicache cannot read are listed with
"readable": false and the first such tensor.

  /usr/bin/python3 tools/reference/make_llamacpp_ref_logits.py --gguf-py /tmp/llama.cpp/gguf-py
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools", "gguf_py"))
sys.path.insert(0, HERE)

TOKENS = [266, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 271, 271, 271, 271, 33, 267]
BASE = "random-llada-bf16.gguf"
# ggml types bicache reads (format/gguf_types.cpp).
READABLE = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K",
            "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gguf-py", required=True, help="gguf-py folder of a llama.cpp checkout")
    ap.add_argument("--dir", default=os.path.join(ROOT, "tests", "data", "llamacpp"))
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.abspath(a.gguf_py))
    import gguf  # noqa: E402  (the checkout's, run as an oracle)
    from gguf import quants  # noqa: E402
    import gguf_writer as gw  # noqa: E402
    import make_golden  # noqa: E402

    # Let tools/gguf_py's reader size and decode every ggml type through gguf-py.
    own_nbytes, own_decode = gw.tensor_nbytes, gw.decode_tensor

    def nbytes(ne, t):
        try:
            return own_nbytes(ne, t)
        except Exception:
            be, bb = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(t)]
            return int(np.prod(ne)) // be * bb

    def decode(raw, t, n):
        try:
            return own_decode(raw, t, n)
        except Exception:
            x = quants.dequantize(np.frombuffer(raw, np.uint8), gguf.GGMLQuantizationType(t))
            return np.asarray(x, dtype=np.float32).reshape(-1)[:n]

    gw.tensor_nbytes, gw.decode_tensor = nbytes, decode

    files = sorted(glob.glob(os.path.join(a.dir, "random-llada-*.gguf")))
    base = make_golden.gguf_forward(os.path.join(a.dir, BASE), TOKENS).astype(np.float32)
    manifest = {"generator": "tools/reference/make_llamacpp_ref_logits.py", "tokens": TOKENS,
                "base": BASE, "logits_format": "float32 [n_tokens][n_vocab], little-endian",
                "files": []}
    for path in files:
        name = os.path.basename(path)
        r = gguf.GGUFReader(path)
        types = {t.name: t.tensor_type.name for t in r.tensors}
        entry = {"file": name, "tensor_types": types}
        bad = [(n, t) for n, t in types.items() if t not in READABLE]
        if bad:
            entry.update(readable=False, first_unreadable_tensor=bad[0][0],
                         first_unreadable_type=bad[0][1])
            manifest["files"].append(entry)
            print(f"{name}: not readable by bicache ({bad[0][0]}: {bad[0][1]})")
            continue
        ref = make_golden.gguf_forward(path, TOKENS).astype(np.float32)
        out = path[:-5] + ".ref-logits.f32"
        ref.astype("<f4").tofile(out)
        entry.update(readable=True, ref_logits=os.path.basename(out),
                     ref_vs_base_max_abs=float(np.abs(ref - base).max()),
                     ref_vs_base_rms=float(np.sqrt(((ref - base) ** 2).mean())),
                     ref_argmax_agrees_with_base=int((ref.argmax(-1) == base.argmax(-1)).sum()))
        ll = path[:-5] + ".llama-logits.f32"
        if os.path.exists(ll):
            lv = np.fromfile(ll, dtype="<f4").reshape(ref.shape)
            entry.update(llama_logits=os.path.basename(ll),
                         ref_vs_llama_max_abs=float(np.abs(ref - lv).max()))
        manifest["files"].append(entry)
        print(f"{name}: vs base max {entry['ref_vs_base_max_abs']:.4f} rms "
              f"{entry['ref_vs_base_rms']:.4f}; vs llama.cpp max "
              f"{entry.get('ref_vs_llama_max_abs', float('nan')):.4f}")
    with open(os.path.join(a.dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
