"""Reference check: the engine's logits on the exported GGUF equal the trainer's on the checkpoint.

Usage: check_engine.py [--ckpt tools/train/ckpt/latest.pt] [--bin build/bicache] [--model models/tiny-llada.gguf]
Runs a few token sequences (held-out prompts + a mask canvas) through the PyTorch model (float32,
weights rounded to bf16 as exported) and through `bicache logits`, and prints the max abs difference
and argmax agreement. Exit 1 if they disagree beyond bf16 tolerance.
"""
import argparse, json, os, subprocess, sys, tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from model import LLaDA, load_checkpoint  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(HERE, "ckpt", "latest.pt"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bicache"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "tiny-llada.gguf"))
    ap.add_argument("--suite", default=os.path.join(ROOT, "tests", "data", "suite", "heldout.jsonl"))
    args = ap.parse_args()
    ck = load_checkpoint(args.ckpt, map_location="cpu")
    m = LLaDA(ck["config"])
    m.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in ck["model"].items()})
    m.eval()
    samples = [json.loads(l) for l in open(args.suite)][::100][:3]
    worst, agree, total = 0.0, 0, 0
    for s in samples:
        text = "<|bos|><|system|>\n" + s["prefix"] + "<|eot|><|user|>\n" + s["prompt"] + "<|eot|><|assistant|>\n"
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text.replace("\n", " "))  # tokenize reads lines; compare on a one-line variant
        out = subprocess.run([args.bin, "tokenize", "-m", args.model, "--file", f.name], capture_output=True, text=True, check=True)
        toks = [int(t) for t in out.stdout.strip().split(",")][:400] + [ck["config"]["vocab"] - 4] * 16
        lf = tempfile.NamedTemporaryFile(suffix=".f32", delete=False)
        lf.close()
        subprocess.run([args.bin, "logits", "-m", args.model, "-t", "1", "--tokens", ",".join(map(str, toks)), "--out", lf.name],
                       capture_output=True, check=True)
        eng = np.fromfile(lf.name, dtype=np.float32).reshape(len(toks), -1)
        with torch.no_grad():
            ref = m(torch.tensor([toks]))[0].numpy()
        worst = max(worst, float(np.abs(eng - ref).max()))
        agree += int((eng.argmax(1) == ref.argmax(1)).sum())
        total += len(toks)
        os.unlink(f.name)
        os.unlink(lf.name)
    print("engine vs trainer: max abs logit diff %.4f, argmax agreement %d/%d" % (worst, agree, total))
    sys.exit(0 if agree >= 0.97 * total else 1)


if __name__ == "__main__":
    main()
