#!/usr/bin/env python3
"""Can the tiny LLaDA architecture learn the add/sub table faster when number tokens carry their value?

The embedded model's arith answers fail on additions and subtractions (docs/model.md, tenth and
fourteenth runs): every number 0-99 is one token, so `x + y` is a table of ~1,800 facts per
operation, learnt a few facts per minute. This probe trains a model on add/sub drill rows only
("What is X op Y?" answered "X op Y = R. #### R", suite.arith_step) and compares two ways of
embedding the number tokens " 0" .. " 99":

  --fourier 0   learned embeddings, as the embedded model has them;
  --fourier K   the last 2K dimensions of the input embedding and of the output head are fixed (not
                trained) Fourier features of the number's value on number rows, 0 on every other
                token's (tools/train/fourier.py).

Every few minutes it scores teacher-forced results: rows of 16 questions with every answer given
except its two result tokens, on facts of the training split and on held-out facts (suite's
prompt-hash split: the table cannot be looked up for those).

  python3 tools/train/probe_numbers.py --minutes 12 --fourier 0
  python3 tools/train/probe_numbers.py --minutes 12 --fourier 12
  python3 tools/train/probe_numbers.py --score models/tiny-llada.gguf   (a full-size model, scored only)

Not part of `make model`; the figures it gave are in docs/model.md.
"""
import argparse
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bpe  # noqa: E402
import fourier  # noqa: E402
import precision  # noqa: E402
import suite  # noqa: E402
import train  # noqa: E402
from model import LLaDA, add_shape_args, default_config, load_checkpoint, shape_of  # noqa: E402


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def row(tok, rng, n_q, heldout):
    """One add/sub drill row: (ids, is_answer, is_result) with the results' token positions marked."""
    def draw():
        x, op, y, r = suite.arith_step(rng, "+-")
        return "What is %d %s %d?" % (x, op, y), "%d %s %d = %d. #### %d" % (x, op, y, r, r)

    qs = suite._questions(draw, n_q, heldout)
    ids, ans, _, _ = train.build_sequence(tok, suite.ARITH_DRILL_INSTR, qs, None)
    eq, marker = tok.encode(" =")[0], tok.encode(" ####")[0]
    res = [False] * len(ids)
    for i in range(1, len(ids)):
        if ans[i] and ids[i - 1] in (eq, marker):
            res[i] = True
    return ids, ans, res


def pad_rows(tok, rows):
    bs, T = len(rows), max(len(r[0]) for r in rows)
    ids = torch.full((bs, T), tok.special["<|pad|>"], dtype=torch.long)
    keym = torch.zeros(bs, T, dtype=torch.bool)
    is_ans = torch.zeros(bs, T, dtype=torch.bool)
    is_res = torch.zeros(bs, T, dtype=torch.bool)
    for b, (r, a, s) in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r)
        keym[b, :len(r)] = True
        is_ans[b, :len(a)] = torch.tensor(a)
        is_res[b, :len(s)] = torch.tensor(s)
    return ids, keym, is_ans, is_res


@torch.no_grad()
def score(model, tok, rows):
    """Teacher-forced: every answer token given but the results; share of questions whose two result
    tokens are both the argmax."""
    model.eval()
    ids, keym, _, is_res = pad_rows(tok, rows)
    inp = ids.masked_fill(is_res, tok.special["<|mask|>"])
    right = (model(inp, key_mask=keym, select=is_res).argmax(-1) == ids[is_res]).view(-1, 2).all(-1)
    model.train()
    return float(right.float().mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fourier", type=int, default=0, choices=range(0, len(fourier.FREQS) + 1), metavar="K",
                    help="fixed Fourier dimensions per number token: 2K (0 = learned embeddings)")
    ap.add_argument("--amp", type=train.positive_float, default=0.1, help="amplitude of the fixed Fourier entries")
    add_shape_args(ap)
    ap.add_argument("--minutes", type=float, default=12, help="training budget")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--q", type=train.q_range, default=(8, 16), help="LO,HI questions per row")
    ap.add_argument("--targets", choices=("results", "answers"), default="results",
                    help="results: only the two result tokens of each answer are masked (the table alone); "
                         "answers: every answer token, as train.py does")
    ap.add_argument("--t-min", type=train.share, default=0.3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=float, default=2.0, help="minutes")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=precision.CHOICES, default="auto")
    ap.add_argument("--save", default=None, help="write the final state_dict here")
    ap.add_argument("--score", default=None, metavar="FILE",
                    help="only score FILE (a train.py checkpoint or a tiny-llada GGUF, the embedded model's shape) "
                         "on the same questions, then exit")
    args = ap.parse_args()
    if args.minutes <= 0:
        ap.error("--minutes must be > 0")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tok = bpe.Tokenizer.load(os.path.join(HERE, "tokenizer.json"))
    erng = random.Random(4242)
    seen = [row(tok, erng, 16, False) for _ in range(8)]
    unseen = [row(tok, erng, 16, True) for _ in range(8)]
    cfg = default_config(tok.n_vocab)
    if args.score:
        model = LLaDA(cfg)
        try:
            if args.score.endswith(".pt"):
                ck = load_checkpoint(args.score)
                if not isinstance(ck, dict) or "model" not in ck:
                    raise ValueError("not a train.py checkpoint (no 'model' entry)")
                model.load_state_dict(ck["model"])
            else:
                import import_gguf
                model.load_state_dict(import_gguf.state_dict_from_gguf(args.score, cfg))
        except Exception as e:  # a missing, foreign or damaged file: say which and why
            ap.error("--score %s: %s" % (args.score, e))
        log("%s: results right: train facts %.3f, held-out facts %.3f"
            % (args.score, score(model, tok, seen), score(model, tok, unseen)))
        return
    cfg.update(shape_of(args))
    model = LLaDA(cfg)
    fixed = None
    if args.fourier:
        try:
            fixed = fourier.FixedNumberDims(model, fourier.number_ids(tok), args.fourier, args.amp)
        except ValueError as e:
            ap.error(str(e))
        fixed.apply()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    precision.set_mode(args.precision)
    log("fourier %d, layers %d, d %d, %.2fM params; results right at start: train facts %.3f, held-out facts %.3f"
        % (args.fourier, cfg["n_layer"], cfg["d_model"], sum(p.numel() for p in model.parameters()) / 1e6,
           score(model, tok, seen), score(model, tok, unseen)))
    t0 = last = time.time()
    step, run_loss = 0, None
    while time.time() - t0 < args.minutes * 60:
        frac = (time.time() - t0) / (args.minutes * 60)
        lr = train.cosine_lr(args.lr, min(1.0, (step + 1) / args.warmup), frac)
        for g in opt.param_groups:
            g["lr"] = lr
        ids, keym, is_ans, is_res = pad_rows(tok, [row(tok, rng, rng.randint(*args.q), False) for _ in range(args.batch)])
        if args.targets == "results":
            is_ans = is_res
        t = (args.t_min + (1 - args.t_min) * torch.rand(args.batch, 1)).clamp(min=1e-3)
        masked = is_ans & (torch.rand(ids.shape) < t)
        with precision.autocast():
            logits = model(ids.masked_fill(masked, tok.special["<|mask|>"]), key_mask=keym, select=masked)
        ce = F.cross_entropy(logits.float(), ids[masked], reduction="none")
        loss = (ce * (1.0 / t).expand_as(masked)[masked]).sum() / is_ans.sum().clamp(min=1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if fixed:
            fixed.apply()
        step += 1
        run_loss = float(loss) if run_loss is None else 0.98 * run_loss + 0.02 * float(loss)
        if time.time() - last > args.eval_every * 60 or time.time() - t0 >= args.minutes * 60:
            last = time.time()
            log("step %d (%.1f min, %.2f steps/s) loss %.3f results right: train facts %.3f, held-out facts %.3f"
                % (step, (last - t0) / 60, step / (last - t0), run_loss, score(model, tok, seen), score(model, tok, unseen)))
    if args.save:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
