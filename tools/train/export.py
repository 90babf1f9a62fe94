#!/usr/bin/env python3
"""Export the latest tiny-LLaDA checkpoint + tokenizer to models/tiny-llada.gguf.

  python3 tools/train/export.py [--ckpt tools/train/ckpt/latest.pt] [--out models/tiny-llada.gguf]
                                [--dtype bf16]

Uses tools/gguf_py/export.py:export_llada (applies the llama.cpp Q/K RoPE permutation).
"""
import argparse
import json
import os
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "gguf_py"))

import format as fmt  # noqa: E402
from model import load_checkpoint  # noqa: E402


def gguf_tokenizer(tok_json):
    sp = tok_json["special"]
    return {
        "pre": tok_json.get("pre", "gpt2"),
        "tokens": tok_json["tokens"],
        "token_type": tok_json["token_types"],
        "merges": tok_json["merges"],
        "bos": sp["<|bos|>"],
        "eos": sp["<|eos|>"],
        "eot": sp["<|eot|>"],
        "pad": sp["<|pad|>"],
        "mask": sp["<|mask|>"],
        "add_bos": False,  # the chat format writes <|bos|> explicitly
        "chat_template": fmt.CHAT_TEMPLATE,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(HERE, "ckpt", "latest.pt"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "tiny-llada.gguf"))
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32"])
    args = ap.parse_args()
    from export import export_llada  # tools/gguf_py/export.py

    ck = load_checkpoint(args.ckpt, map_location="cpu", trainer=True)
    with open(args.tokenizer) as f:
        tok = json.load(f)
    cfg = dict(ck["config"])
    if cfg["vocab"] != len(tok["tokens"]):
        raise SystemExit("export.py: the checkpoint's vocabulary (%d) is not the tokenizer's (%d tokens in %s)"
                         % (cfg["vocab"], len(tok["tokens"]), args.tokenizer))
    cfg["name"] = "bicache-tiny-llada"
    sd = {k: v.float() for k, v in ck["model"].items()}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    export_llada(sd, cfg, gguf_tokenizer(tok), args.out, dtype=args.dtype, name=cfg["name"])
    size = os.path.getsize(args.out)
    print("wrote %s (%.1f MB) from %s step %d" % (args.out, size / 1e6, args.ckpt, ck["step"]))
    assert size <= 32 * 1024 * 1024, "model file over 32 MB"


if __name__ == "__main__":
    main()
