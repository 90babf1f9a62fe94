#!/usr/bin/env python3
"""Turn an exported tiny-LLaDA GGUF back into a trainer checkpoint (the inverse of export.py).

  python3 tools/train/import_gguf.py [--gguf models/tiny-llada.gguf] [--out tools/train/ckpt/latest.pt]
                                     [--step N]

Checkpoints are git-ignored, so a later session that wants to fine-tune the committed model starts
from its GGUF: weights are read back (bf16 -> float32, exact), the llama.cpp Q/K RoPE permutation is
undone, the optimizer state starts empty (AdamW moments rebuild within a few dozen steps).
"""
import argparse
import importlib.util
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "gguf_py"))

import bpe  # noqa: E402
import train  # noqa: E402  (its argparse types)
from model import LLaDA, default_config  # noqa: E402


def _gguf_export():
    """tools/gguf_py/export.py, loaded by path: tools/train has an export.py of its own, so a plain
    `import export` depends on which of the two directories is first on sys.path."""
    spec = importlib.util.spec_from_file_location("gguf_py_export", os.path.join(ROOT, "tools", "gguf_py", "export.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def state_dict_from_gguf(path, cfg):
    unpermute_qk = _gguf_export().unpermute_qk
    from gguf_reader import GGUFReader
    if not os.path.isfile(path):
        raise FileNotFoundError("no file at %s" % path)
    try:
        r = GGUFReader(path)
    except Exception as e:  # the reader raises ValueError / struct errors on a bad file
        raise ValueError("cannot read %s as GGUF: %s" % (path, e))
    if r.kv.get("general.architecture") != "llada":
        raise ValueError("%s is not a llada GGUF (architecture %r)" % (path, r.kv.get("general.architecture")))
    # The checkpoint has the embedded model's shape (train.py resumes only that one).
    shape = {"n_layer": "llada.block_count", "d_model": "llada.embedding_length", "n_head": "llada.attention.head_count",
             "n_kv_head": "llada.attention.head_count_kv", "ff": "llada.feed_forward_length", "vocab": "llada.vocab_size"}
    wrong = ["%s %s (the embedded model: %s)" % (k, r.kv.get(key), cfg[k]) for k, key in shape.items()
             if key in r.kv and r.kv[key] != cfg[k]]
    if wrong:
        raise ValueError("%s does not have the embedded model's shape: %s" % (path, ", ".join(wrong)))
    try:
        nh, nkv = cfg["n_head"], cfg["n_kv_head"]
        sd = {"tok_emb.weight": r.tensor("token_embd.weight"), "norm.weight": r.tensor("output_norm.weight")}
        if "output.weight" in r.tensors:
            sd["lm_head.weight"] = r.tensor("output.weight")
        names = {"attn_norm": "attn_norm", "attn_q": "wq", "attn_k": "wk", "attn_v": "wv", "attn_output": "wo",
                 "ffn_norm": "ffn_norm", "ffn_gate": "w_gate", "ffn_up": "w_up", "ffn_down": "w_down"}
        for i in range(cfg["n_layer"]):
            for g, p in names.items():
                w = r.tensor("blk.%d.%s.weight" % (i, g))
                if g == "attn_q":
                    w = unpermute_qk(w, nh)
                elif g == "attn_k":
                    w = unpermute_qk(w, nkv)
                sd["layers.%d.%s.weight" % (i, p)] = w
        return {k: torch.from_numpy(v.copy()).float() for k, v in sd.items()}
    except (KeyError, ValueError, OSError) as e:  # a missing or truncated tensor
        raise ValueError("cannot read the tensors of %s: %s" % (path, e))


def model_from_gguf(path, cfg):
    """A trainer LLaDA with the GGUF's weights (every parameter read; the RoPE frequencies are
    computed, not stored)."""
    model = LLaDA(cfg)
    missing, unexpected = model.load_state_dict(state_dict_from_gguf(path, cfg), strict=False)
    assert not unexpected, unexpected
    assert all(k.endswith("inv_freq") for k in missing), missing
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", default=os.path.join(ROOT, "models", "tiny-llada.gguf"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "ckpt", "latest.pt"))
    ap.add_argument("--step", type=train.count, default=0, help="step count to record (the model's training step)")
    ap.add_argument("--level", type=train.positive_int, default=28, help="docqa curriculum level to record")
    ap.add_argument("--train-minutes", type=train.nonneg_float, default=0.0, help="training minutes to record")
    args = ap.parse_args()
    tok = bpe.Tokenizer.load(args.tokenizer)
    cfg = default_config(tok.n_vocab)
    try:
        model = model_from_gguf(args.gguf, cfg)
    except (OSError, ValueError) as e:  # a missing, foreign, damaged or other-shape file
        raise SystemExit("import_gguf.py: %s" % e)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": args.step,
                "train_seconds": args.train_minutes * 60, "config": cfg, "level": args.level,
                "tokenizer": args.tokenizer}, args.out)
    print("wrote %s from %s (step %d)" % (args.out, args.gguf, args.step))


if __name__ == "__main__":
    main()
