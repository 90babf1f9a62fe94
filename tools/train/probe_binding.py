#!/usr/bin/env python3
"""Does the model read the asked entity? A docqa binding probe on a trainer checkpoint or a GGUF.

  python3 tools/train/probe_binding.py [--ckpt tools/train/ckpt/latest.pt | --gguf FILE] [--n 40]

Each trial is a document of two facts with the same attribute ("Kazu's pet is hen. The pet of Lugan
is mole."), asked once about each entity. For the first answer token it reports how often the
asked entity's value outscores the other one (binding: ~1.0; copying "a pet from the text": ~0.5),
how often the first fact's value wins whichever entity is asked (an order heuristic), and the mean
change of P(first value) when only the asked entity changes (0 = the entity is ignored).
"""
import argparse
import os
import random
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bpe  # noqa: E402
import format as fmt  # noqa: E402
import suite  # noqa: E402
from model import LLaDA, default_config, load_checkpoint  # noqa: E402


def load(args, tok):
    if args.gguf:
        from import_gguf import model_from_gguf
        return model_from_gguf(args.gguf, default_config(tok.n_vocab)).eval()
    ck = load_checkpoint(args.ckpt)
    m = LLaDA(ck["config"])
    m.load_state_dict(ck["model"])
    return m.eval()


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(HERE, "ckpt", "latest.pt"))
    ap.add_argument("--gguf", default=None, help="probe an exported GGUF instead of a checkpoint")
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer.json"))
    ap.add_argument("--n", type=int, default=40, help="documents (two questions each)")
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()
    tok = bpe.Tokenizer.load(args.tokenizer)
    model = load(args, tok)
    mask = tok.special["<|mask|>"]
    rng = random.Random(args.seed)
    right = first = 0
    effect = 0.0
    for _ in range(args.n):
        attr = rng.choice(suite.ATTR_NAMES)
        ents = rng.sample(suite.NAMES, 2)
        vals = rng.sample(suite.ATTRS[attr], 2)
        sents = [rng.choice(suite.FACT_TEMPLATES).format(n=e, a=attr, v=v) for e, v in zip(ents, vals)]
        prefix = "Answer from these facts only, in one word.\nFacts: " + " ".join(sents)
        vid = [tok.encode(" " + v, allow_special=False)[0] for v in vals]
        p_first = []
        for i, e in enumerate(ents):
            ids = tok.encode(fmt.prompt_text(prefix, "What is the %s of %s?" % (attr, e)))
            x = torch.tensor([ids + [mask] * fmt.GEN_LENGTH])
            p = torch.softmax(model(x)[0, len(ids)].float(), -1)
            right += int(p[vid[i]] > p[vid[1 - i]])
            first += int(p[vid[0]] > p[vid[1]])
            p_first.append(float(p[vid[0]]))
        effect += abs(p_first[0] - p_first[1])
    n = 2 * args.n
    print("asked entity's value wins %d/%d (%.2f; type copying alone ~0.5)" % (right, n, right / n))
    print("first fact's value wins   %d/%d (%.2f)" % (first, n, first / n))
    print("mean |change of P(first value)| when only the asked entity changes: %.3f" % (effect / args.n))


if __name__ == "__main__":
    main()
