#!/usr/bin/env python3
"""Write a random-weight llada, dream or sdar GGUF of any width, streaming tensors to disk.

Defaults are LLaDA-8B widths (d 4096, ff 12288, 32 heads, vocab 126464) with 4 layers in bf16
(~3.8 GB); memory stays at about one chunk of rows (--chunk-mb) whatever the file size.
Metadata and tokenizer are what bicache's loader needs (same keys as export.py; a synthetic
byte-level BPE tokenizer whose mask token is the last id).

  /usr/bin/python3 tools/gguf_py/make_random_model.py OUT.gguf [--arch llada|dream|sdar] [--d 4096]
      [--ff 12288] [--heads 32] [--kv-heads H] [--layers 4] [--vocab 126464] [--type bf16]
      [--tied] [--seed 0] [--block-length 4]

sdar (block diffusion, Qwen3 layout): per-head Q/K RMSNorm weights, diffusion.block_length, and the
ChatML tokenizer Dream's files use; SDAR-8B widths are --heads 32 --kv-heads 8 --vocab 151936.

Weights: matrices ~ N(0, 1/in_features), token embedding ~ N(0, 1), norms 1 + N(0, 0.1),
Dream q/k/v biases ~ N(0, 0.02). Deterministic for a given seed and shape.
"""
from __future__ import annotations

import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402
import gguf_writer as gw  # noqa: E402


def tensor_plan(arch: str, d: int, ff: int, nh: int, nkv: int, layers: int, vocab: int,
                mtype: int, tied: bool):
    """[(name, numpy shape (rows, cols) or (n,), ggml type, kind)] in file order."""
    hd = d // nh
    plan = [("token_embd.weight", (vocab, d), mtype, "embd"),
            ("output_norm.weight", (d,), gw.GGML_F32, "norm")]
    if not tied:
        plan.append(("output.weight", (vocab, d), mtype, "mat"))
    for i in range(layers):
        b = f"blk.{i}."
        plan.append((b + "attn_norm.weight", (d,), gw.GGML_F32, "norm"))
        plan.append((b + "attn_q.weight", (nh * hd, d), mtype, "mat"))
        plan.append((b + "attn_k.weight", (nkv * hd, d), mtype, "mat"))
        plan.append((b + "attn_v.weight", (nkv * hd, d), mtype, "mat"))
        if arch == "sdar":
            plan.append((b + "attn_q_norm.weight", (hd,), gw.GGML_F32, "norm"))
            plan.append((b + "attn_k_norm.weight", (hd,), gw.GGML_F32, "norm"))
        if arch == "dream":
            plan.append((b + "attn_q.bias", (nh * hd,), gw.GGML_F32, "bias"))
            plan.append((b + "attn_k.bias", (nkv * hd,), gw.GGML_F32, "bias"))
            plan.append((b + "attn_v.bias", (nkv * hd,), gw.GGML_F32, "bias"))
        plan.append((b + "attn_output.weight", (d, nh * hd), mtype, "mat"))
        plan.append((b + "ffn_norm.weight", (d,), gw.GGML_F32, "norm"))
        plan.append((b + "ffn_gate.weight", (ff, d), mtype, "mat"))
        plan.append((b + "ffn_up.weight", (ff, d), mtype, "mat"))
        plan.append((b + "ffn_down.weight", (d, ff), mtype, "mat"))
    return plan


def metadata_writer(arch: str, d: int, ff: int, nh: int, nkv: int, layers: int, vocab: int,
                    mtype: int, context: int, name: str, block_length: int = 4) -> gw.GGUFWriter:
    w = gw.GGUFWriter()
    w.add_string("general.architecture", arch)
    w.add_string("general.name", name)
    w.add_uint32("general.file_type", gw.FILE_TYPE[mtype])
    w.add_uint32(f"{arch}.context_length", context)
    w.add_uint32(f"{arch}.embedding_length", d)
    w.add_uint32(f"{arch}.block_count", layers)
    w.add_uint32(f"{arch}.feed_forward_length", ff)
    w.add_uint32(f"{arch}.attention.head_count", nh)
    w.add_uint32(f"{arch}.attention.head_count_kv", nkv)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32(f"{arch}.rope.freq_base", 500000.0 if arch == "llada" else 1000000.0)
    w.add_uint32(f"{arch}.rope.dimension_count", d // nh)
    w.add_bool(f"{arch}.attention.causal", False)
    w.add_uint32(f"{arch}.vocab_size", vocab)
    if arch == "llada":
        w.add_bool("diffusion.shift_logits", False)
    if arch == "sdar":
        w.add_uint32("diffusion.block_length", block_length)
    export._write_tokenizer(w, export.synthetic_tokenizer(vocab, "dream" if arch == "sdar" else arch))
    return w


def header_bytes(w: gw.GGUFWriter, plan) -> bytes:
    out = [gw.GGUF_MAGIC, struct.pack("<IQQ", gw.GGUF_VERSION, len(plan), len(w.kv))]
    for key, vtype, value, elem in w.kv:
        out.append(gw._pack_string(key))
        out.append(struct.pack("<I", vtype))
        out.append(gw._pack_value(vtype, value, elem))
    offset = 0
    for name, shape, gt, _ in plan:
        ne = list(reversed(shape))
        out.append(gw._pack_string(name))
        out.append(struct.pack("<I", len(ne)))
        out.append(struct.pack(f"<{len(ne)}Q", *ne))
        out.append(struct.pack("<IQ", gt, offset))
        offset += gw.tensor_nbytes(ne, gt)
        offset += (-offset) % w.alignment
    head = b"".join(out)
    return head + b"\0" * ((-len(head)) % w.alignment)


def write_tensor(f, rng: np.random.Generator, shape, gt: int, kind: str, chunk_bytes: int):
    if len(shape) == 1:
        if kind == "norm":
            x = 1.0 + 0.1 * rng.standard_normal(shape[0], dtype=np.float32)
        else:
            x = 0.02 * rng.standard_normal(shape[0], dtype=np.float32)
        data = gw.encode_tensor(x, gt)
    else:
        rows, cols = shape
        scale = np.float32(1.0 if kind == "embd" else 1.0 / np.sqrt(cols))
        step = max(1, chunk_bytes // (cols * 4))
        n = 0
        for r in range(0, rows, step):
            m = min(step, rows - r)
            x = rng.standard_normal((m, cols), dtype=np.float32)
            x *= scale
            chunk = gw.encode_tensor(x, gt)
            f.write(chunk)
            n += len(chunk)
        data = None
    if data is not None:
        f.write(data)
        n = len(data)
    f.write(b"\0" * ((-n) % gw.DEFAULT_ALIGNMENT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--arch", choices=["llada", "dream", "sdar"], default="llada")
    ap.add_argument("--block-length", type=int, default=4, help="sdar: diffusion.block_length")
    ap.add_argument("--d", type=int, default=4096)
    ap.add_argument("--ff", type=int, default=12288)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=None, help="default: --heads")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=126464)
    ap.add_argument("--type", choices=sorted(gw.GGML_TYPE_BY_NAME), default="bf16",
                    help="storage type of the 2-D weights (norms and biases stay f32)")
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--tied", action="store_true", help="no output.weight (tied to token_embd)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--chunk-mb", type=int, default=16, help="float32 rows generated at once")
    a = ap.parse_args(argv)
    nkv = a.kv_heads or a.heads
    if a.d % a.heads or a.heads % nkv or (a.d // a.heads) % 2:
        ap.error("--d must be a multiple of --heads, --heads of --kv-heads, head dim even")
    if a.vocab < 266:
        ap.error("--vocab must be at least 266 (256 bytes + special tokens)")
    mtype = gw.GGML_TYPE_BY_NAME[a.type]
    if mtype in (gw.GGML_Q8_0, gw.GGML_Q4_0) and (a.d % 32 or a.ff % 32):
        ap.error("quantized --type needs --d and --ff multiples of 32")
    w = metadata_writer(a.arch, a.d, a.ff, a.heads, nkv, a.layers, a.vocab, mtype, a.context,
                        f"random-{a.arch}-d{a.d}", a.block_length)
    plan = tensor_plan(a.arch, a.d, a.ff, a.heads, nkv, a.layers, a.vocab, mtype, a.tied)
    rng = np.random.default_rng(a.seed)
    with open(a.out, "wb") as f:
        f.write(header_bytes(w, plan))
        for i, (name, shape, gt, kind) in enumerate(plan):
            # The last tensor gets no trailing padding (as gguf_writer.py and bicache write).
            start = f.tell()
            write_tensor(f, rng, shape, gt, kind, a.chunk_mb << 20)
            if i + 1 == len(plan):
                f.truncate(start + gw.tensor_nbytes(list(reversed(shape)), gt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
