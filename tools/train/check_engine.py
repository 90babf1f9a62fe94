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


def engine(argv):
    """Runs the engine; its own one-line error ends the check when it fails."""
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("check_engine.py: `%s %s` failed (exit %d): %s"
                         % (os.path.basename(argv[0]), argv[1], out.returncode, out.stderr.strip()))
    return out.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(HERE, "ckpt", "latest.pt"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bicache"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "tiny-llada.gguf"))
    ap.add_argument("--suite", default=os.path.join(ROOT, "tests", "data", "suite", "heldout.jsonl"))
    args = ap.parse_args()
    for what, path in (("--bin", args.bin), ("--model", args.model), ("--suite", args.suite)):
        if not os.path.isfile(path):
            raise SystemExit("check_engine.py: %s: no file at %s" % (what, path))
    ck = load_checkpoint(args.ckpt, map_location="cpu", trainer=True)
    m = LLaDA(ck["config"])
    m.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in ck["model"].items()})
    m.eval()
    samples = [json.loads(l) for l in open(args.suite)][::100][:3]
    worst, agree, total = 0.0, 0, 0
    for s in samples:
        text = "<|bos|><|system|>\n" + s["prefix"] + "<|eot|><|user|>\n" + s["prompt"] + "<|eot|><|assistant|>\n"
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text.replace("\n", " "))  # tokenize reads lines; compare on a one-line variant
        try:
            out = engine([args.bin, "tokenize", "-m", args.model, "--file", f.name])
        finally:
            os.unlink(f.name)
        toks = [int(t) for t in out.strip().split(",")][:400] + [ck["config"]["vocab"] - 4] * 16
        lf = tempfile.NamedTemporaryFile(suffix=".f32", delete=False)
        lf.close()
        try:
            engine([args.bin, "logits", "-m", args.model, "-t", "1", "--tokens", ",".join(map(str, toks)), "--out", lf.name])
            eng = np.fromfile(lf.name, dtype=np.float32).reshape(len(toks), -1)
        finally:
            os.unlink(lf.name)
        with torch.no_grad():
            ref = m(torch.tensor([toks]))[0].numpy()
        worst = max(worst, float(np.abs(eng - ref).max()))
        agree += int((eng.argmax(1) == ref.argmax(1)).sum())
        total += len(toks)
    print("engine vs trainer: max abs logit diff %.4f, argmax agreement %d/%d" % (worst, agree, total))
    sys.exit(0 if agree >= 0.97 * total else 1)


if __name__ == "__main__":
    main()
