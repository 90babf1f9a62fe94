#!/usr/bin/env python3
"""Skill probes of a trainer checkpoint on prompts the training stream never shows (questions whose
hash puts them in the held-out split, fresh prefixes):

- rule application when the instruction names the rule (`--p-named` rows) against the few-shot
  rule task of the suite (the rule only shown), one question per request, greedy low-confidence
  decoding (gen 32, steps 32, block 32): exact-match counts per rule;
- arithmetic drill steps (`--p-drill` rows) under teacher forcing: both results of every answer
  ("X op Y = R. #### R", all of each result's tokens) masked, the rest of the row visible; the
  share of results predicted in full.

  python3 tools/train/probe_skills.py [--ckpt tools/train/ckpt/latest.pt] [--n 48] [--threads 2]
"""
import argparse
import os
import random
import sys
from collections import defaultdict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import format as fmt  # noqa: E402
import precision  # noqa: E402
import suite  # noqa: E402
import train  # noqa: E402
from model import LLaDA, default_config, load_checkpoint  # noqa: E402


def rule_probe(model, tok, n, seed):
    """{kind: [correct...]} for n named and n few-shot rule requests, kind 'named-<rule>' etc."""
    rng = random.Random(seed)
    samples = []
    for _ in range(n):
        for named in (True, False):
            prefix, qs, name = suite.rule_group(rng, rng.randint(3, 6), 1, True, 0, named=named)
            samples.append((("named-" if named else "fewshot-") + name, prefix, qs[0][0], qs[0][1]))
    prompts = [tok.encode(fmt.prompt_text(p, q)) for _, p, q, _ in samples]
    outs = train.generate(model, tok, prompts, 32, 32, 32)
    res = defaultdict(list)
    for (kind, _, _, answer), out in zip(samples, outs):
        res[kind].append(fmt.score("rule", fmt.extract_answer(tok, out), answer))
    return res


def result_spans(tok, ids, is_ans):
    """[(row, start, end)] of every result in the answers: the tokens after " =" or " ####" up to
    the first token that is not a digit continuation (one token per number under "gpt2" up to 99,
    one per digit under "gpt2-digits")."""
    eq, marker = tok.encode(" =")[0], tok.encode(" ####")[0]
    digit = [t.lstrip("\u0120").isdigit() for t in tok.tokens]  # "Ġ" = byte-level space
    cont = [t.isdigit() for t in tok.tokens]  # digits without a leading space
    spans = []
    for b in range(ids.shape[0]):
        row, ans = ids[b].tolist(), is_ans[b].tolist()
        for t in range(1, len(row)):
            if ans[t] and row[t - 1] in (eq, marker) and digit[row[t]]:
                e = t + 1
                while e < len(row) and ans[e] and cont[row[e]]:
                    e += 1
                spans.append((b, t, e))
    return spans


def drill_probe(model, tok, rows, seed):
    """(results predicted, results) on drill rows with every result token of each answer masked
    (both results of "X op Y = R. #### R"); a result counts when all its tokens are predicted."""
    b = train.Batcher(tok, seed, set(), 32)
    b.p_doc, b.p_rule, b.p_drill = 0.0, 0.0, 1.0
    ids, is_ans, valid = b.batch(rows, 0.0)[:3]
    spans = result_spans(tok, ids, is_ans)
    x = ids.clone()
    for r, s, e in spans:
        x[r, s:e] = tok.special["<|mask|>"]
    with torch.no_grad(), precision.autocast():
        pred = model(x, valid).float().argmax(-1)
    hit = sum(bool((pred[r, s:e] == ids[r, s:e]).all()) for r, s, e in spans)
    return hit, len(spans)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=os.path.join(HERE, "ckpt", "latest.pt"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer.json"))
    ap.add_argument("--n", type=int, default=48, help="named and few-shot rule requests each")
    ap.add_argument("--drill-rows", type=int, default=8)
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=precision.CHOICES, default="auto")
    args = ap.parse_args()
    precision.set_mode(args.precision)
    torch.set_num_threads(args.threads)
    tok = bpe.Tokenizer.load(args.tokenizer)
    model = LLaDA(default_config(tok.n_vocab))
    ck = load_checkpoint(args.ckpt)
    model.load_state_dict(ck["model"])
    model.eval()
    print("checkpoint %s, step %d" % (args.ckpt, ck["step"]))
    res = rule_probe(model, tok, args.n, args.seed)
    for group in ("named", "fewshot"):
        kinds = sorted(k for k in res if k.startswith(group + "-"))
        tot = sum(sum(res[k]) for k in kinds), sum(len(res[k]) for k in kinds)
        print("rule %-8s %3d/%d  " % (group, tot[0], tot[1]) +
              "  ".join("%s %d/%d" % (k.split("-")[1], sum(res[k]), len(res[k])) for k in kinds))
    hit, n = drill_probe(model, tok, args.drill_rows, args.seed + 1)
    print("drill results (teacher-forced, all result tokens masked) %d/%d = %.3f" % (hit, n, hit / max(n, 1)))


if __name__ == "__main__":
    main()
