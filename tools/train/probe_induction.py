#!/usr/bin/env python3
"""How fast can the tiny LLaDA architecture learn few-shot rule induction? A self-contained probe.

Trains on rule rows only (suite.rule_group: k examples of one hidden rule, a few queries, every
answer masked with ratio t ~ U(t_min, 1)), short rows with no 32-token canvas (each answer is its
own tokens plus <|eot|>): at the committed model's size, 0.20-0.23 steps/s of 32 rows here against
0.13-0.18 for train.py's mixed steps of 16 (f32, 2 cores). Every few minutes it
decodes the held-out suite's 100 rule samples (low-confidence remasking, one token per step, the
answer's length given: the probe measures the rule, not the stop) and prints exact match.

  python3 tools/train/probe_induction.py --minutes 30 [--init fresh|GGUF|CKPT.pt] [--layers 4 --d 128]
  python3 tools/train/probe_induction.py --minutes 0 --init models/tiny-llada.gguf   (score only)

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
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import bpe  # noqa: E402
import format as fmt  # noqa: E402
import precision  # noqa: E402
import suite  # noqa: E402
import train  # noqa: E402
from model import LLaDA, add_shape_args, default_config, load_checkpoint, shape_of  # noqa: E402


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def row(tok, rng, n_q, named):
    """One rule row: (ids, is_answer) with every query's answer + <|eot|> as targets."""
    prefix, qs, _ = suite.rule_group(rng, rng.randint(3, 6), n_q, False, named=named)
    ids, ans, _, _ = train.build_sequence(tok, prefix, qs, None)
    return ids, ans


def batch(tok, rng, bs, q_range, named, t_min):
    rows = [row(tok, rng, rng.randint(*q_range), rng.random() < named) for _ in range(bs)]
    T = max(len(r[0]) for r in rows)
    pad, mask = tok.special["<|pad|>"], tok.special["<|mask|>"]
    ids = torch.full((bs, T), pad, dtype=torch.long)
    keym = torch.zeros(bs, T, dtype=torch.bool)
    is_ans = torch.zeros(bs, T, dtype=torch.bool)
    for b, (r, a) in enumerate(rows):
        ids[b, :len(r)] = torch.tensor(r)
        keym[b, :len(r)] = True
        is_ans[b, :len(a)] = torch.tensor(a)
    t = t_min + (1 - t_min) * torch.rand(bs, 1)
    t = t.clamp(min=1e-3)
    masked = is_ans & (torch.rand(bs, T) < t)
    inp = ids.masked_fill(masked, mask)
    return inp, ids, keym, masked, is_ans, t


@torch.no_grad()
def evaluate(model, tok, samples):
    """Exact match on held-out rule samples, the answer length given: (right, {rule: (right, n)})."""
    model.eval()
    mask = tok.special["<|mask|>"]
    right = 0
    per = {}
    for s in samples:
        p = tok.encode(fmt.prompt_text(s["prefix"], s["prompt"]))
        gold = tok.encode(fmt.answer_text(s["answer"]), allow_special=False)
        ids = torch.tensor([p + [mask] * len(gold) + [tok.special["<|eot|>"]]])
        lo = len(p)
        for _ in range(len(gold)):
            logits = model(ids)[0, lo:lo + len(gold)].float()
            logits[:, mask] = -1e9
            prob, arg = logits.softmax(-1).max(-1)
            still = ids[0, lo:lo + len(gold)] == mask
            prob[~still] = -1
            j = int(prob.argmax())
            ids[0, lo + j] = arg[j]
        ok = ids[0, lo:lo + len(gold)].tolist() == gold
        right += int(ok)
        r = rule_of(s)
        per[r] = (per.get(r, (0, 0))[0] + int(ok), per.get(r, (0, 0))[1] + 1)
    model.train()
    return right, per


def report(result):
    right, per = result
    n = sum(t for _, t in per.values())
    return "%.2f (%s)" % (right / max(1, n), " ".join("%s %d/%d" % (k, *per[k]) for k in sorted(per)))


def rule_of(s):
    """The rule a held-out sample's examples show (the first that maps all of them)."""
    return (suite.rules_shown(s["prefix"]) or ["?"])[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", default="fresh",
                    help="'fresh', a tiny-llada GGUF, a train.py checkpoint, or a state_dict this probe saved "
                         "(--save; give the same --layers/--d/--heads/--ff)")
    add_shape_args(ap)
    ap.add_argument("--minutes", type=float, default=30, help="training budget (0: only score the start model)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--q", type=train.q_range, default=(1, 3), help="LO,HI queries per row")
    ap.add_argument("--named", type=train.share, default=0.0, help="share of rows whose instruction names the rule")
    ap.add_argument("--t-min", type=train.share, default=0.7)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=float, default=4.0, help="minutes")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--save", default=None, help="write the final state_dict here")
    ap.add_argument("--precision", choices=precision.CHOICES, default="auto")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tok = bpe.Tokenizer.load(os.path.join(HERE, "tokenizer.json"))
    cfg = default_config(tok.n_vocab)  # the embedded model's shape: a GGUF or a train.py checkpoint
    small = shape_of(args)
    sd = None
    if args.init == "fresh":
        cfg.update(small)
    elif args.init.endswith(".pt"):
        sd = load_checkpoint(args.init)
        if "model" in sd:  # a train.py checkpoint
            sd = sd["model"]
        else:  # a state_dict this probe saved
            cfg.update(small)
    else:
        import import_gguf
        sd = import_gguf.state_dict_from_gguf(args.init, cfg)
    model = LLaDA(cfg)
    if sd is not None:
        model.load_state_dict(sd)
    n_par = sum(p.numel() for p in model.parameters())
    held = [s for s in suite.load_jsonl(os.path.join(ROOT, "tests/data/suite/heldout.jsonl")) if s["family"] == "rule"]
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    precision.set_mode(args.precision)
    log("params %.2fM, layers %d, d %d; held-out rule samples %d; start acc %s"
        % (n_par / 1e6, cfg["n_layer"], cfg["d_model"], len(held), report(evaluate(model, tok, held))))
    if args.minutes <= 0:
        return
    t0 = time.time()
    last_eval = t0
    step = 0
    run_loss = None
    while time.time() - t0 < args.minutes * 60:
        frac = (time.time() - t0) / (args.minutes * 60)
        lr = train.cosine_lr(args.lr, min(1.0, (step + 1) / args.warmup), frac)
        for g in opt.param_groups:
            g["lr"] = lr
        inp, ids, keym, masked, is_ans, t = batch(tok, rng, args.batch, args.q, args.named, args.t_min)
        with precision.autocast():
            logits = model(inp, key_mask=keym, select=masked)
        ce = F.cross_entropy(logits.float(), ids[masked], reduction="none")
        w = (1.0 / t).expand_as(masked)[masked]
        loss = (ce * w).sum() / is_ans.sum().clamp(min=1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        run_loss = float(loss) if run_loss is None else 0.98 * run_loss + 0.02 * float(loss)
        if time.time() - last_eval > args.eval_every * 60:
            last_eval = time.time()
            log("step %d (%.1f min, %.2f steps/s) loss %.3f lr %.2e held-out rule %s"
                % (step, (time.time() - t0) / 60, step / (time.time() - t0), run_loss, lr, report(evaluate(model, tok, held))))
    log("final step %d loss %.3f held-out rule %s" % (step, run_loss, report(evaluate(model, tok, held))))
    if args.save:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
