#!/usr/bin/env python3
"""Train the embedded tiny LLaDA-style DLM (masked diffusion, LLaDA SFT objective).

  OMP_NUM_THREADS=2 nice -n 10 python3 tools/train/train.py --minutes 85

- Data: generated on the fly by suite.TrainStream (disjoint from the held-out
  suite). Each sequence = one prefix + several Q/A turns (docqa 4-8 questions,
  rule 3-4, arith 2-3), every answer masked (format.py describes the layout).
- Objective: 80% of sequences: answer tokens masked with ratio t~U(eps,1), CE on
  masked positions weighted 1/t, normalised by the number of answer tokens;
  20%: every token masked with ratio t (LLaDA pre-training style), normalised
  by the sequence length.
- Curriculum on docqa fact count, gated by the running accuracy on docqa answer
  values (starts at <= 2 facts, +1 (+2 above 8) each time the accuracy exceeds --raise-at).
- AdamW, warmup + cosine (time based), grad clip 1, bf16 autocast on a CPU with native bf16,
  f32 otherwise (--precision, precision.py).
- Resumable: checkpoints in tools/train/ckpt/ (latest.pt) every --save-every min.
- Held-out accuracy (low-confidence remasking decoder) every --eval-every min.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import format as fmt  # noqa: E402
import fourier  # noqa: E402
import precision  # noqa: E402
import suite  # noqa: E402
from model import LLaDA, default_config, load_checkpoint  # noqa: E402

N_LAYER = default_config(2)["n_layer"]
T_EPS = 1e-3  # LLaDA's lowest mask ratio (t ~ U(T_EPS, 1)); keeps the 1/t weights finite

ROOT = os.path.dirname(os.path.dirname(HERE))


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


# ----------------------------------------------------------------------------
# data

def build_sequence(tok, prefix, qs, gen_length, first_to_marker=False):
    """Returns (ids, is_answer, is_first, plen) for a packed multi-turn sequence
    (is_first marks the first token of every answer: always masked in SFT rows;
    plen = tokens of the shared prefix span, the part BiCache caches).
    gen_length None: the last turn's answer is its own tokens + <|eot|> like the others, no canvas.
    first_to_marker (worked rule rows): is_first marks every answer token before "####" ("rule T.",
    T the rule's letter), so no turn's letter is visible to the others: each must be told from the
    examples."""
    ids = tok.encode(fmt.prefix_text(prefix))
    plen = len(ids)
    ans = [False] * len(ids)
    first = [False] * len(ids)
    eot = tok.special["<|eot|>"]
    marker = tok.encode(" ####")[0] if first_to_marker else None
    for i, (q, a) in enumerate(qs):
        t = tok.encode(fmt.turn_text(q))
        ids += t
        ans += [False] * len(t)
        first += [False] * len(t)
        if i == len(qs) - 1 and gen_length is not None:
            c = fmt.target_canvas(tok, a, gen_length)
        else:
            c = tok.encode(fmt.answer_text(a), allow_special=False) + [eot]
        ids += c
        ans += [True] * len(c)
        n_first = c.index(marker) if marker in c else 1
        first += [True] * n_first + [False] * (len(c) - n_first)
    return ids, ans, first, plen


def cosine_lr(peak, warm, frac):
    """Learning rate at fraction frac of a cosine cycle from peak down to a tenth of it, times the warmup
    factor warm (0..1)."""
    return peak * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def q_range(text):
    """argparse type of --rule-q / --arith-q: 'LO,HI' with 1 <= LO <= HI."""
    try:
        lo, hi = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("expected LO,HI (two integers), got %r" % text)
    if not 1 <= lo <= hi:
        raise argparse.ArgumentTypeError("expected 1 <= LO <= HI, got %r" % text)
    return lo, hi


def share(text):
    """argparse type of --p-named / --p-drill / --t-min: a share in [0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a share in [0, 1], got %r" % text)
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError("expected a share in [0, 1], got %r" % text)
    return v


def positive_int(text):
    """argparse type of --steps: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError("expected a positive integer, got %r" % text)
    return v


def positive_float(text):
    """argparse type of --fourier-amp (and probe_numbers.py --amp): a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError("expected a positive number, got %r" % text)
    return v


def nonneg_float(text):
    """argparse type of budgets and loss weights (--minutes, --eos-weight, ...): a finite number >= 0."""
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError("expected a number >= 0, got %r" % text)
    return v


def count(text):
    """argparse type of --eval-n: an integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        v = -1
    if v < 0:
        raise argparse.ArgumentTypeError("expected a whole number >= 0, got %r" % text)
    return v


def drill_ops(text):
    """argparse type of --drill-ops: a non-empty subset of "+-*", each operation once."""
    if not text or any(c not in suite.DRILL_OPS for c in text) or len(set(text)) != len(text):
        raise argparse.ArgumentTypeError(
            "expected operations from %r, each at most once (e.g. '+-'), got %r" % (suite.DRILL_OPS, text))
    return text


def device_name(text):
    """--device: cpu, cuda or cuda:N, as a torch.device"""
    if text in ("cpu", "cuda") or (text.startswith("cuda:") and text[5:].isdigit()):
        return torch.device(text)
    raise argparse.ArgumentTypeError("must be cpu, cuda or cuda:N, got %r" % text)


def layer_pair(text):
    """argparse type of --att-layers: LA,LC with 0 <= LA <= LC < n_layer."""
    try:
        la, lc = (int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("expected LA,LC (two layer indices), got %r" % text)
    if not 0 <= la <= lc < N_LAYER:
        raise argparse.ArgumentTypeError("need 0 <= LA <= LC < %d, got %r" % (N_LAYER, text))
    return la, lc


def layer_index(text):
    """argparse type of --rule-layer: 0 <= L < n_layer."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected a layer index, got %r" % text)
    if not 0 <= v < N_LAYER:
        raise argparse.ArgumentTypeError("need 0 <= L < %d, got %r" % (N_LAYER, text))
    return v


def template_list(text):
    """argparse type of --bind-templates: comma-separated indices into suite.FACT_TEMPLATES."""
    try:
        idx = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("expected comma-separated integers, got %r" % text)
    n = len(suite.FACT_TEMPLATES)
    if not all(0 <= i < n for i in idx):
        raise argparse.ArgumentTypeError("template indices must be in 0..%d, got %r" % (n - 1, text))
    return idx


def bucket(n, q=64):
    """Pad lengths to a few shapes: oneDNN re-plans (slowly) for every new shape."""
    return ((n + q - 1) // q) * q


class Batcher:
    def __init__(self, tok, seed, heldout_prefixes, gen_length):
        self.tok = tok
        self.rng = random.Random(seed)
        self.ts = suite.TrainStream(seed + 1, heldout_prefixes)
        self.gen = gen_length
        self.name_ids = set(self._one_token(n) for n in suite.NAMES)
        self.value_ids = set(self._one_token(v) for v in suite.VALUES)
        self.dot_id = self._one_token(".", space=False)
        self.letter_ids = {self._one_token(c): c for c in suite.LETTERS}
        self.marker_id = self._one_token("####")
        self.rule_word_id = self._one_token("rule")

    def _one_token(self, word, space=True):
        ids = self.tok.encode((" " if space else "") + word)
        assert len(ids) == 1, "%r is not one token" % word
        return ids[0]

    def docqa_links(self, ids, first, plen):
        """Token positions of the retrieval each docqa answer needs: a list of (answer slot, the
        question's entity, the fact's value, the fact's entity), one per question turn. A fact is
        the prefix sentence holding both the asked entity and the answer value (values are unique
        across attributes, so it is unique)."""
        facts = {}  # (entity id, value id) -> (entity pos, value pos)
        ent, val = None, None
        for p in range(plen):
            t = ids[p]
            if t == self.dot_id:
                if ent is not None and val is not None:
                    facts[(ids[ent], ids[val])] = (ent, val)
                ent, val = None, None
            elif t in self.name_ids:
                ent = p
            elif t in self.value_ids:
                val = p
        links = []
        for a in (p for p in range(len(ids)) if first[p]):
            q = next((p for p in range(a - 1, plen - 1, -1) if ids[p] in self.name_ids), None)
            if q is None or (ids[q], ids[a]) not in facts:
                continue
            fe, fv = facts[(ids[q], ids[a])]
            links.append((a, q, fv, fe))
        return links

    def rule_links(self, ids, first, plen):
        """Token positions of the copy every rule answer letter needs: a list of (answer letter,
        the query input letter it comes from), over all question turns. Input letters are distinct,
        so the source of a copied letter is where it sits in the input; for `shift` (every output
        letter the input's next one) it is the letter at the same index."""
        links = []
        starts = [p for p in range(len(ids)) if first[p] and not first[p - 1]]
        prev = plen
        for a in starts:
            src = [p for p in range(prev, a) if ids[p] in self.letter_ids]  # the query's input letters
            xs = [self.letter_ids[ids[p]] for p in src]
            if ids[a] == self.rule_word_id:  # worked, "rule T. #### OUTPUT": letters follow the marker
                a = next((p + 1 for p in range(a, len(ids)) if ids[p] == self.marker_id), a)
            outs = []
            for p in range(a, len(ids)):
                if ids[p] not in self.letter_ids:
                    break
                outs.append(p)
            prev = outs[-1] + 1 if outs else a + 1
            ys = [self.letter_ids[ids[p]] for p in outs]
            if ys and len(ys) == len(xs) and ys == suite.RULES["shift"](xs):
                links += [(o, s_) for o, s_ in zip(outs, src)]
            elif ys and all(y in xs for y in ys):
                links += [(o, src[xs.index(y)]) for o, y in zip(outs, ys)]
        return links

    p_rule = 0.6  # share of the non-docqa rows that are rule (the rest: arith)
    doc_q = (4, 8)  # questions (answers masked) per docqa row
    p_bind = 0.0  # share of docqa rows whose document uses only 1-2 attributes (entity binding)
    bind_level = None  # max facts of those rows (None: the docqa range); raised on bind accuracy
    bind_templates = None  # fact templates of those rows (None: all)
    bind_q = None  # questions per binding row (None: doc_q)
    rule_q = (3, 4)  # questions (answers masked) per rule row
    arith_q = (2, 3)  # questions per arith row
    rule_batch_q = (1, 3)  # questions per row in a rule-only batch (--rule-batches): short rows, cheap steps
    drill_batch_q = (8, 12)  # questions per row in a drill-only batch (--drill-batches)
    p_named = 0.0  # share of the rule rows whose instruction names the rule ("rule-named")
    p_worked = 0.0  # share of the other rule rows whose answers give the rule's letter first ("rule-worked")
    p_drill = 0.0  # share of the arith rows that are arithmetic drills ("arith-drill")
    drill_q = (12, 16)  # questions per drill row
    drill_ops = suite.DRILL_OPS  # the operations drill rows ask
    level = 8  # max docqa facts; raised when the running docqa accuracy is high

    def facts_range(self, prog):
        hi = int(self.level)
        lo = max(1, min(10, hi // 3))
        if self.rng.random() < 0.2:
            return (1, max(2, lo))
        return (lo, hi)

    def sample(self, prog, long=False, only=None):
        """only: a family every row of this batch is ("rule" for --rule-batches, "arith-drill" for
        --drill-batches); None draws by p_doc / p_rule."""
        r = self.rng.random()
        fam = "docqa" if r < self.p_doc else ("rule" if r < self.p_doc + (1 - self.p_doc) * self.p_rule else "arith")
        if only is not None:
            fam = only
        npre = 0
        if long:
            npre = self.rng.randint(12, 40)
        elif self.rng.random() < 0.3:
            npre = self.rng.randint(1, 3)
        n_attrs, templates = None, None
        if fam == "docqa":
            nq = self.rng.randint(*self.doc_q)
            facts = self.facts_range(prog)
            if self.p_bind > 0 and self.rng.random() < self.p_bind:
                # Every value in the document has the asked value's type, so copying "a pet
                # from the text" (what the model learned first) is right 1 time in n_facts / k.
                n_attrs = self.rng.randint(1, 2)
                fam = "docqa-bind"
                templates = self.bind_templates
                if self.bind_q is not None:
                    nq = self.rng.randint(*self.bind_q)
                if self.bind_level is not None:
                    facts = (2, max(2, int(self.bind_level)))
        elif fam == "rule":
            nq = self.rng.randint(*(self.rule_batch_q if only == "rule" else self.rule_q))
            facts = (3, 8)
            if self.p_named > 0 and self.rng.random() < self.p_named:
                fam = "rule-named"
            elif self.p_worked > 0 and self.rng.random() < self.p_worked:
                fam = "rule-worked"
        elif fam == "arith-drill":
            nq = self.rng.randint(*self.drill_batch_q)
            facts = (3, 8)
        else:
            nq = self.rng.randint(*self.arith_q)
            facts = (3, 8)
            if self.p_drill > 0 and self.rng.random() < self.p_drill:
                fam = "arith-drill"
                nq = self.rng.randint(*self.drill_q)
        gen_fam = "docqa" if fam.startswith("docqa") else fam
        prefix, qs = self.ts.group(gen_fam, nq, facts=facts, n_preamble=npre, n_attrs=n_attrs,
                                   templates=templates, drill_ops=self.drill_ops)
        ids, ans, first, plen = build_sequence(self.tok, prefix, qs, self.gen, first_to_marker=fam == "rule-worked")
        if fam.startswith("docqa"):
            links = self.docqa_links(ids, first, plen)
        elif fam.startswith("rule"):
            links = self.rule_links(ids, first, plen)
        else:
            links = []
        return ids, ans, first, plen, fam, links

    def batch(self, bs, prog, long=False, only=None):
        seqs = [self.sample(prog, long, only) for _ in range(bs)]
        T = bucket(max(len(s[0]) for s in seqs))
        pad = self.tok.special["<|pad|>"]
        ids = torch.full((bs, T), pad, dtype=torch.long)
        is_ans = torch.zeros((bs, T), dtype=torch.bool)
        valid = torch.zeros((bs, T), dtype=torch.bool)
        first = torch.zeros((bs, T), dtype=torch.bool)
        isdoc = torch.tensor([q[4].startswith("docqa") for q in seqs])
        isbind = torch.tensor([q[4] == "docqa-bind" for q in seqs])
        plen = torch.tensor([q[3] for q in seqs])
        for i, (s, a, f1, _, _, _) in enumerate(seqs):
            ids[i, :len(s)] = torch.tensor(s)
            is_ans[i, :len(a)] = torch.tensor(a)
            first[i, :len(f1)] = torch.tensor(f1)
            valid[i, :len(s)] = True
        return ids, is_ans, valid, first, isdoc, plen, isbind, [q[5] for q in seqs]


def diffusion_loss(model, ids, is_ans, valid, mask_id, gen, p_full=0.2, eps=T_EPS, first=None, isdoc=None,
                   eos_id=None, eos_weight=1.0, plen=None, iso_pairs=0, iso_max=4, cons_weight=1.0, isbind=None,
                   links=None, att_sup=0.0, att_layers=(1, 3), rule_sup=0.0, rule_layer=5):
    """Masked-diffusion loss. With iso_pairs > 0 (BiCache-aware fine-tuning), the first iso_pairs rows
    are repeated with the same masked input but their prefix isolated in layers < d (d ~ U{1..iso_max},
    see LLaDA.forward's iso): the copies add their own diffusion loss (the model must answer from a
    prefix computed alone, as BiCache's cached forward of depth d serves it), and a consistency term
    1 - cos(K/V in the full request, K/V of the isolated copy) over the prefix tokens of layers 0..d
    (the quantity `bicache calibrate` measures) pulls the shallow prefix K/V towards prefix-alone ones.
    Returns (loss, docqa value accuracy or None, consistency term or None, accuracy of the first
    answer token of the rule/arith rows or None, value accuracy of the docqa-bind rows or None,
    the attention-supervision parts or None, see below).

    att_sup > 0 (with links, Batcher.docqa_links per row): attention supervision of the retrieval
    circuit docqa needs, on the SFT docqa rows: in layer att_layers[0], head 0 of every answer slot
    attends to its question's entity and the same head of every fact value to its fact's entity; in layer
    att_layers[1], head 0 of the answer slot attends to the asked fact's value. The term is the sum
    over those three of the mean -log attention probability, weighted att_sup, plus a contrastive
    term (ident) that makes the layer-LA head's output identify the entity it read. rule_sup > 0:
    in layer rule_layer, head 0 of every rule answer letter attends to the query input letter it
    comes from (Batcher.rule_links), weighted rule_sup. The last return value is {part: mean -log p} (the
    entity match a-val is the part that takes long), or None without supervision. The exported
    model is plain LLaDA; this only shapes what training finds (docs/model.md).

    eps: the lowest mask ratio, t ~ U(eps, 1) (LLaDA: T_EPS). --t-min raises it, so every answer is
    mostly masked, as when decoding starts from an all-mask canvas (rule answers with most letters
    visible can be completed by elimination, without the rule)."""
    B, T = ids.shape
    t = (1 - eps) * torch.rand(B, generator=gen) + eps
    full = torch.rand(B, generator=gen) < p_full
    region = torch.where(full[:, None], valid, is_ans)
    m = (torch.rand(B, T, generator=gen) < t[:, None]) & region
    forced = None
    if first is not None:
        # SFT rows: the first answer token of every turn (the docqa value) is always a
        # target (weight 1 = its expected LLaDA weight), so each sequence carries
        # several prefix-dependent targets.
        forced = first & ~full[:, None] & ~m
        m = m | forced
    # ensure at least one masked token per sequence
    none = m.sum(1) == 0
    if none.any():
        for i in torch.nonzero(none).flatten().tolist():
            cand = torch.nonzero(region[i]).flatten()
            j = cand[torch.randint(len(cand), (1,), generator=gen)]
            m[i, j] = True
    x = torch.where(m, torch.full_like(ids, mask_id), ids)
    wfull = (1.0 / t)[:, None].expand(B, T)
    if forced is not None:
        wfull = torch.where(forced, torch.ones_like(wfull), wfull)
    if eos_id is not None and eos_weight != 1.0:
        # SFT rows: the last turn's canvas is ~30 <|eos|> padding targets that are
        # trivial; normalising by all of them (and weighting them 1 each) left the
        # retrieved value ~1/33 of an SFT row's loss, swamped by the full-mask rows,
        # and the model never learned to copy from the prefix. Down-weight padding
        # and normalise SFT rows by their content targets (value words + <|eot|>).
        sft = ~full[:, None]
        pad_t = (ids == eos_id) & sft
        wfull = torch.where(pad_t, wfull * eos_weight, wfull)
        cnt = torch.where(full, region.sum(1).float(),
                          (region & ~pad_t).sum(1).float() + eos_weight * (region & pad_t).sum(1).float())
    else:
        cnt = region.sum(1).float()
    n = min(iso_pairs, B) if plen is not None else 0
    iso, kv, kvl = None, None, 0
    accrow = first & ~full[:, None] & isdoc[:, None] if (first is not None and isdoc is not None) else None
    othrow = first & ~full[:, None] & ~isdoc[:, None] if (first is not None and isdoc is not None) else None
    bindrow = accrow & isbind[:, None] if (accrow is not None and isbind is not None) else None
    if n > 0:
        d = torch.randint(1, iso_max + 1, (n,), generator=gen)
        iso = (torch.cat([plen, plen[:n]]), torch.cat([torch.zeros(B, dtype=torch.long), d]))
        x, ids, valid, m = (torch.cat([a, a[:n]]) for a in (x, ids, valid, m))
        wfull, cnt = torch.cat([wfull, wfull[:n]]), torch.cat([cnt, cnt[:n]])
        if accrow is not None:
            accrow = torch.cat([accrow, torch.zeros_like(accrow[:n])])
            othrow = torch.cat([othrow, torch.zeros_like(othrow[:n])])
            if bindrow is not None:
                bindrow = torch.cat([bindrow, torch.zeros_like(bindrow[:n])])
        kv, kvl = [], iso_max + 1
    # attention supervision: segments (name, layer, head, rows, queries, keys), gathered per layer
    segs = []
    doc_rows, fe_ids = None, None
    if links is not None and (att_sup > 0 or rule_sup > 0):
        la, lc = att_layers
        doc = [(b, lk) for b in range(B) if not bool(full[b]) for lk in links[b] if len(lk) == 4]
        rul = [(b, lk) for b in range(B) if not bool(full[b]) for lk in links[b] if len(lk) == 2]
        if att_sup > 0 and doc:
            bb = torch.tensor([b for b, _ in doc])
            a, q, fv, fe = (torch.tensor([lk[j] for _, lk in doc]) for j in range(4))
            # one head for both gatherings ("the nearest name before me"), so the answer slot and
            # the value carry the entity through the same OV map and layer LC matches like with like
            segs += [("q-ent", la, 0, bb, a, q), ("v-ent", la, 0, bb, fv, fe), ("a-val", lc, 0, bb, a, fv)]
            doc_rows, fe_ids = bb, ids[bb, fe]  # [nl] the row and the entity token of each asked fact
        if rule_sup > 0 and rul:
            bb = torch.tensor([b for b, _ in rul])
            o, src = (torch.tensor([lk[j] for _, lk in rul]) for j in range(2))
            segs.append(("rule", rule_layer, 0, bb, o, src))
    take, att_probs, where = None, None, {}
    if segs:
        take = {}
        for name, layer, head, bb, qq, kk in segs:
            prev = take.get(layer)
            off = 0 if prev is None else len(prev[0])
            cur = (torch.full_like(bb, head), bb, qq, kk)
            take[layer] = cur if prev is None else tuple(torch.cat([u, w]) for u, w in zip(prev, cur))
            where[name] = (layer, off, off + len(bb))
        att_probs = []
    with precision.autocast():
        logits = model(x, valid, select=m, iso=iso, kv_layers=kvl, kv_out=kv, att_take=take,
                       att_out=att_probs)  # only masked positions: [N, V]
    ce = F.cross_entropy(logits.float(), ids[m], reduction="none")
    w = wfull[m]
    R = ids.shape[0]
    norm = cnt.clamp(min=1)[:, None].expand(R, T)[m]
    hit = logits.argmax(-1) == ids[m]  # [N] per masked position

    def row_acc(rows):
        """accuracy over the masked positions selected by rows [R,T], or None"""
        if rows is None:
            return None
        sel = rows[m]
        return hit[sel].float().mean().item() if sel.any() else None

    acc, oacc, bacc = row_acc(accrow), row_acc(othrow), row_acc(bindrow)
    loss = (ce * w / norm).sum() / R
    cons = None
    if n > 0:
        ar = torch.arange(T)
        pm = (ar[None, :] < plen[:n, None]).float()  # [n,T] prefix tokens of the pairs
        tot, cntc = 0.0, 0.0
        for li, (k, v) in enumerate(kv):
            lm = (d >= li).float()[:, None] * pm  # layers 0..d of each pair
            if lm.sum() == 0:
                continue
            for a in (k, v):  # [R,Hk,T,hd] -> pairs' rows only, heads flattened: [n,T,Hk*hd]
                full_kv = a[:n].transpose(1, 2).reshape(n, T, -1).float()
                iso_kv = a[B:].detach().transpose(1, 2).reshape(n, T, -1).float()
                c = F.cosine_similarity(full_kv, iso_kv, dim=-1)  # [n,T]
                tot = tot + ((1 - c) * lm).sum()
                cntc += float(lm.sum())
        cons = tot / max(cntc, 1.0)
        loss = loss + cons_weight * cons
        cons = float(cons)
    asup = None
    if att_probs:
        probs = {i: p for i, p, _ in att_probs}
        outs = {i: o for i, _, o in att_probs}

        def part(name, src):
            layer, i0, i1 = where[name]
            return src[layer][i0:i1]

        asup = {}
        for name in where:
            nll_t = -part(name, probs).clamp(min=1e-6).log().mean()
            loss = loss + (rule_sup if name == "rule" else att_sup) * nll_t
            asup[name] = float(nll_t)
    if att_probs and "q-ent" in where:
        # The gathering head's output must carry *which* entity it read, or layer LC has nothing
        # to match (it read ~the same vector for every entity: cos 0.87 between different ones).
        # Contrastive term: each answer slot's output is nearest, among the fact values of its
        # row, to the output at its own fact's value.
        ua, uv = F.normalize(part("q-ent", outs), dim=-1), F.normalize(part("v-ent", outs), dim=-1)
        sim = ua @ uv.T / 0.1  # [nl,nl]
        sim = sim.masked_fill(doc_rows[:, None] != doc_rows[None, :], float("-inf"))
        same_ent = fe_ids[:, None] == fe_ids[None, :]  # values of the same entity (same row) are positives
        lse_all = torch.logsumexp(sim, dim=1)
        lse_pos = torch.logsumexp(sim.masked_fill(~same_ent, float("-inf")), dim=1)
        ident = (lse_all - lse_pos).mean()
        loss = loss + att_sup * ident
        asup["ident"] = float(ident)
    return loss, acc, cons, oacc, bacc, asup


# ----------------------------------------------------------------------------
# decoding (LLaDA low-confidence remasking, temperature 0)

@torch.no_grad()
def generate(model, tok, prompts, gen_length=32, steps=16, block_length=32, batch=16):
    mask_id = tok.special["<|mask|>"]
    pad = tok.special["<|pad|>"]
    outs = []
    for b0 in range(0, len(prompts), batch):
        ps = prompts[b0:b0 + batch]
        B = len(ps)
        T = bucket(max(len(p) for p in ps) + gen_length)
        x = torch.full((B, T), pad, dtype=torch.long)
        valid = torch.zeros((B, T), dtype=torch.bool)
        starts = []
        for i, p in enumerate(ps):
            x[i, :len(p)] = torch.tensor(p)
            x[i, len(p):len(p) + gen_length] = mask_id
            valid[i, :len(p) + gen_length] = True
            starts.append(len(p))
        nblocks = gen_length // block_length
        spb = steps // nblocks
        ar = torch.arange(T)[None, :]
        st = torch.tensor(starts)[:, None]
        for nb in range(nblocks):
            blk = (ar >= st + nb * block_length) & (ar < st + (nb + 1) * block_length)
            nmask = ((x == mask_id) & blk).sum(1)
            base = nmask // spb
            rem = nmask % spb
            for s in range(spb):
                k = base + (s < rem).long()
                with precision.autocast():
                    logits = model(x, valid).float()
                x0 = logits.argmax(-1)
                p = torch.softmax(logits, -1).gather(-1, x0[..., None]).squeeze(-1)
                cur = (x == mask_id) & blk
                conf = torch.where(cur, p, torch.full_like(p, -1e9))
                for i in range(B):
                    if k[i] <= 0:
                        continue
                    idx = torch.topk(conf[i], int(k[i])).indices
                    x[i, idx] = x0[i, idx]
        for i in range(B):
            outs.append(x[i, starts[i]:starts[i] + gen_length].tolist())
    return outs


def evaluate(model, tok, samples, gen_length, steps):
    model.eval()
    prompts = [tok.encode(fmt.prompt_text(s["prefix"], s["prompt"])) for s in samples]
    # sort by length for efficient batching
    order = sorted(range(len(samples)), key=lambda i: len(prompts[i]))
    outs = generate(model, tok, [prompts[i] for i in order], gen_length, steps, gen_length)
    res = {}
    examples = {}
    for j, i in enumerate(order):
        s = samples[i]
        pred = fmt.extract_answer(tok, outs[j])
        ok = fmt.score(s["family"], pred, s["answer"])
        res.setdefault(s["family"], []).append(ok)
        examples.setdefault(s["family"], (pred, s["answer"]))
    model.train()
    return {f: sum(v) / len(v) for f, v in res.items()}, examples


# ----------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=nonneg_float, default=85, help="wall budget of this invocation")
    ap.add_argument("--steps", type=positive_int, default=None,
                    help="step budget of this invocation (stops at whichever of --minutes and --steps comes first); "
                         "with --new-cycle the cosine cycle spans these steps, so a phase does the same updates on "
                         "a fast or a slow machine")
    ap.add_argument("--cycle-steps", type=positive_int, default=None,
                    help="with --new-cycle and --steps: the cosine cycle spans this many steps (default: --steps), "
                         "so a phase can stop part-way through its cycle on any machine")
    ap.add_argument("--total-minutes", type=positive_float, default=None,
                    help="cumulative training time the LR schedule spans (default: minutes + already done)")
    ap.add_argument("--curriculum-minutes", type=nonneg_float, default=35, help="(unused; curriculum is accuracy gated)")
    ap.add_argument("--raise-at", type=share, default=0.6, help="running docqa value accuracy that raises the fact count")
    ap.add_argument("--max-facts", type=positive_int, default=32)
    ap.add_argument("--level", type=positive_int, default=None, help="override the current max docqa facts")
    ap.add_argument("--p-doc", type=share, default=0.6)
    ap.add_argument("--p-rule", type=share, default=0.6, help="share of the non-docqa rows that are rule (rest arith)")
    ap.add_argument("--doc-q", type=q_range, default=(4, 8), help="LO,HI questions per docqa row (all answers masked)")
    ap.add_argument("--p-bind", type=share, default=0.0,
                    help="share of docqa rows whose document uses only 1-2 attributes, so only the entity "
                         "tells the candidate values apart")
    ap.add_argument("--bind-start", type=positive_int, default=None,
                    help="start a curriculum on the --p-bind rows: documents of 2..N facts, N raised "
                         "when their value accuracy passes --bind-raise-at (default: no curriculum, "
                         "or the checkpoint's)")
    ap.add_argument("--bind-raise-at", type=share, default=0.8)
    ap.add_argument("--bind-templates", type=template_list, default=None,
                    help="comma-separated indices of suite.FACT_TEMPLATES the --p-bind rows use (default: all)")
    ap.add_argument("--bind-q", type=q_range, default=None,
                    help="LO,HI questions per --p-bind row (default: --doc-q). With one question, the "
                         "document entity that the question names is the only one asked about, so "
                         "'the value next to the entity the question repeats' answers it (as in the "
                         "held-out requests); with many, every entity is asked and that cue is void")
    ap.add_argument("--att-sup", type=nonneg_float, default=0.0,
                    help="weight of the attention supervision of docqa's retrieval circuit (see diffusion_loss)")
    ap.add_argument("--att-layers", type=layer_pair, default=(1, 3),
                    help="LA,LC: the layers of that supervision (entity gathering, value retrieval)")
    ap.add_argument("--rule-sup", type=nonneg_float, default=0.0,
                    help="weight of the attention supervision of rule answers: each answer letter attends "
                         "to the query letter it comes from, in --rule-layer (head 0)")
    ap.add_argument("--rule-layer", type=layer_index, default=5)
    ap.add_argument("--rule-q", type=q_range, default=(3, 4), help="LO,HI questions per rule row (all answers masked)")
    ap.add_argument("--rule-batches", type=share, default=0.0,
                    help="share of the steps whose batch holds rule rows only: a batch is padded to its longest "
                         "row, so rule rows (~150-400 tokens) cost a fraction of a step that also holds docqa rows")
    ap.add_argument("--rule-batch-q", type=q_range, default=(1, 3), help="LO,HI questions per row of a --rule-batches batch")
    ap.add_argument("--drill-batches", type=share, default=0.0,
                    help="share of the steps whose batch holds arithmetic drill rows only (--drill-ops, "
                         "--drill-batch-q questions each; no BiCache copies): many add/sub facts per step")
    ap.add_argument("--drill-batch-q", type=q_range, default=(8, 12),
                    help="LO,HI questions per row of a --drill-batches batch")
    ap.add_argument("--arith-q", type=q_range, default=(2, 3), help="LO,HI questions per arith row")
    ap.add_argument("--p-named", type=share, default=0.0,
                    help="share of the rule rows whose instruction names the rule (applying a known rule)")
    ap.add_argument("--p-worked", type=share, default=0.0,
                    help="share of the other rule rows whose answers give the rule's letter, then the "
                         "output after '####' (suite.RULE_WORKED)")
    ap.add_argument("--p-drill", type=share, default=0.0,
                    help="share of the arith rows that are arithmetic drills (single steps, no word problem)")
    ap.add_argument("--drill-q", type=q_range, default=(12, 16), help="LO,HI questions per drill row")
    ap.add_argument("--drill-ops", type=drill_ops, default=suite.DRILL_OPS,
                    help="the operations drill rows ask, a subset of '+-*' (e.g. '+-': the sums the model misses)")
    ap.add_argument("--fourier", type=int, default=0, choices=range(0, len(fourier.FREQS) + 1), metavar="K",
                    help="hold the last 2K dims of the number tokens' embedding and output rows at fixed Fourier "
                         "features of their value (fourier.py; the other tokens' dims keep training); 0 = off")
    ap.add_argument("--fourier-amp", type=positive_float, default=0.1, help="amplitude of the --fourier entries")
    ap.add_argument("--ckpt-dir", default=os.path.join(HERE, "ckpt"))
    ap.add_argument("--tokenizer", default=os.path.join(HERE, "tokenizer.json"))
    ap.add_argument("--heldout", default=os.path.join(ROOT, "tests/data/suite/heldout.jsonl"))
    ap.add_argument("--batch", type=positive_int, default=16)
    ap.add_argument("--lr", type=positive_float, default=1e-3)
    ap.add_argument("--warmup", type=positive_int, default=150)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gen-length", type=positive_int, default=fmt.GEN_LENGTH)
    ap.add_argument("--eval-n", type=count, default=30, help="held-out samples per family (0: no held-out checks)")
    ap.add_argument("--eval-steps", type=positive_int, default=16)
    ap.add_argument("--eval-every", type=positive_float, default=9.0, help="minutes")
    ap.add_argument("--save-every", type=positive_float, default=5.0, help="minutes")
    ap.add_argument("--p-long", type=share, default=0.03)
    ap.add_argument("--t-min", type=share, default=0.0,
                    help="lowest answer mask ratio: t ~ U(T_MIN, 1) (default: LLaDA's U(eps, 1)); high values train "
                         "on mostly masked answers, as decoding from an all-mask canvas sees them")
    ap.add_argument("--p-full", type=share, default=0.2, help="share of rows masked everywhere (pre-training style)")
    ap.add_argument("--eos-weight", type=nonneg_float, default=1.0,
                    help="loss weight of the <|eos|> canvas padding targets in SFT rows (1 = plain LLaDA SFT; 0.05 tried)")
    ap.add_argument("--iso-pairs", type=count, default=0,
                    help="rows per batch repeated with their prefix isolated in the shallow layers (BiCache-aware fine-tuning)")
    ap.add_argument("--iso-max", type=positive_int, default=4, help="deepest isolated depth d of those copies (d ~ U{1..iso-max})")
    ap.add_argument("--cons-weight", type=nonneg_float, default=1.0, help="weight of the prefix K/V consistency term")
    ap.add_argument("--cycle-minutes", type=positive_float, default=None,
                    help="with --new-cycle: length of the cosine cycle (default --minutes; a run may stop before its end)")
    ap.add_argument("--new-cycle", action="store_true",
                    help="a fresh cosine LR cycle over this invocation's --minutes (short warmup), instead of the cumulative schedule")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--threads", type=positive_int, default=2)
    ap.add_argument("--adaptive-threads", type=count, default=1)
    ap.add_argument("--precision", choices=precision.CHOICES, default="auto",
                    help="forward precision: bf16 autocast, f32, or auto (bf16 on CUDA or on a CPU with native bf16)")
    ap.add_argument("--device", type=device_name, default="cpu",
                    help="torch device of the model, the batches and the mask sampling: cpu, or cuda[:N] "
                         "(PyTorch >= 2.0 with CUDA; the random streams then differ from a CPU run's)")
    args = ap.parse_args()
    if args.cycle_steps is not None and (args.steps is None or not args.new_cycle or args.cycle_minutes is not None):
        ap.error("--cycle-steps needs --steps and --new-cycle, and not --cycle-minutes")
    if args.rule_batches + args.drill_batches > 1:
        ap.error("--rule-batches %g and --drill-batches %g are shares of the steps and sum to more than 1"
                 % (args.rule_batches, args.drill_batches))

    dev = args.device
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            ap.error("--device %s: this PyTorch sees no CUDA device" % args.device)
        if not hasattr(torch, "set_default_device"):
            ap.error("--device %s needs PyTorch >= 2.0 (torch.set_default_device); this is %s"
                     % (args.device, torch.__version__))
        # Every tensor the batcher, the loss and the model create lands on the device.
        torch.set_default_device(dev)
    torch.set_num_threads(args.threads)
    log("precision", precision.set_mode(args.precision, dev.type), "(--precision %s, --device %s)"
        % (args.precision, args.device))
    os.makedirs(args.ckpt_dir, exist_ok=True)
    tok = bpe.Tokenizer.load(args.tokenizer)
    mask_id = tok.special["<|mask|>"]
    if os.path.exists(args.heldout):
        held = suite.load_jsonl(args.heldout)
    else:
        held = suite.make_heldout()
    hp = set(s["prefix"] for s in held)
    eval_set = []
    for f in suite.FAMILIES:
        eval_set += [s for s in held if s["family"] == f][:args.eval_n]

    latest = os.path.join(args.ckpt_dir, "latest.pt")
    torch.manual_seed(args.seed)
    cfg = default_config(tok.n_vocab)
    model = LLaDA(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    step, done_s, level, bind_level = 0, 0.0, 2, None
    if os.path.exists(latest) and not args.fresh:
        ck = load_checkpoint(latest, map_location=dev)
        if not isinstance(ck, dict) or ck.get("config") != cfg:
            old = ck.get("config", {}) if isinstance(ck, dict) else {}
            diff = sorted(k for k in set(old) | set(cfg) if old.get(k) != cfg.get(k))
            raise SystemExit("%s was trained with another model shape or tokenizer (differs in: %s); "
                             "use --fresh to start over, or another --ckpt-dir" % (latest, ", ".join(diff) or "all"))
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, done_s = ck["step"], ck["train_seconds"]
        level = ck.get("level", 8)
        bind_level = ck.get("bind_level")
        log("resumed from", latest, "step", step, "train_min %.1f" % (done_s / 60))
    fixed = None
    if args.fourier:
        try:
            fixed = fourier.FixedNumberDims(model, fourier.number_ids(tok), args.fourier, args.fourier_amp,
                                            zero_others=False)
        except ValueError as e:
            ap.error(str(e))
        fixed.apply()
        log("fourier: number tokens' last %d dims fixed (amplitude %g)" % (2 * args.fourier, args.fourier_amp))
    total_s = (args.total_minutes * 60) if args.total_minutes else done_s + args.minutes * 60
    nparam = sum(p.numel() for p in model.parameters())
    log("config", json.dumps(cfg), "params %.2fM" % (nparam / 1e6))

    batcher = Batcher(tok, args.seed * 1000003 + step, hp, args.gen_length)
    batcher.p_doc = args.p_doc
    batcher.p_rule = args.p_rule
    batcher.rule_q, batcher.arith_q = args.rule_q, args.arith_q
    batcher.p_named, batcher.p_drill, batcher.drill_q = args.p_named, args.p_drill, args.drill_q
    batcher.p_worked = args.p_worked
    batcher.rule_batch_q = args.rule_batch_q
    batcher.drill_batch_q = args.drill_batch_q
    batcher.drill_ops = args.drill_ops
    batcher.doc_q, batcher.p_bind = args.doc_q, args.p_bind
    batcher.bind_level = args.bind_start if args.bind_start is not None else bind_level
    batcher.bind_templates = args.bind_templates
    batcher.bind_q = args.bind_q
    batcher.level = level if args.level is None else args.level
    acc_ema, last_raise, oacc_ema, bacc_ema, last_bind_raise = 0.0, step, 0.0, None, step
    gen = torch.Generator(device=dev).manual_seed(args.seed * 7919 + step)

    def save():
        tmp = latest + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "train_seconds": done_s, "config": cfg, "level": batcher.level, "bind_level": batcher.bind_level,
                    "tokenizer": args.tokenizer}, tmp)
        os.replace(tmp, latest)
        log("saved", latest, "step", step)

    t_start = time.time()
    t_seg = time.time()
    step0 = step
    cons_acc, cons_n = 0.0, 0
    asup_acc, asup_n = {}, 0
    last_save = last_eval = time.time()
    loss_acc, n_acc, tok_acc = 0.0, 0, 0
    model.train()
    while True:
        now = time.time()
        if now - t_start > args.minutes * 60 or done_s >= total_s:
            break
        if args.steps is not None and step - step0 >= args.steps:
            break
        prog = done_s / (args.curriculum_minutes * 60)
        if args.new_cycle:
            if args.steps is not None and args.cycle_minutes is None:
                frac = min(1.0, (step - step0) / (args.cycle_steps or args.steps))
            else:
                frac = min(1.0, (now - t_start) / ((args.cycle_minutes or args.minutes) * 60))
            wu = min(1.0, (step - step0 + 1) / 50)
        else:
            frac = min(1.0, done_s / total_s)
            wu = min(1.0, (step + 1) / args.warmup)
        lr = cosine_lr(args.lr, wu, frac)
        for g in opt.param_groups:
            g["lr"] = lr
        long = batcher.rng.random() < args.p_long
        # Drawn only when asked for, so that the random stream of a run without --rule-batches and
        # --drill-batches is unchanged (and that of a run with --rule-batches alone too).
        only = None
        if (args.rule_batches > 0 or args.drill_batches > 0) and not long:
            r = batcher.rng.random()
            only = "rule" if r < args.rule_batches else (
                "arith-drill" if r < args.rule_batches + args.drill_batches else None)
        ids, is_ans, valid, first, isdoc, plen, isbind, links = batcher.batch(max(4, args.batch // 4) if long else args.batch,
                                                                            prog, long, only)
        loss, dacc, cons, oacc, bacc, asup = diffusion_loss(model, ids, is_ans, valid, mask_id, gen, p_full=args.p_full, first=first,
                                          isdoc=isdoc, eos_id=tok.special["<|eos|>"], eos_weight=args.eos_weight,
                                          plen=plen, iso_pairs=0 if long or only == "arith-drill" else args.iso_pairs, iso_max=args.iso_max,
                                          cons_weight=args.cons_weight, isbind=isbind, links=links,
                                          att_sup=args.att_sup, att_layers=args.att_layers,
                                          rule_sup=args.rule_sup, rule_layer=args.rule_layer,
                                          eps=max(T_EPS, args.t_min))
        if asup is not None:
            for k_, v_ in asup.items():
                asup_acc[k_] = asup_acc.get(k_, 0.0) + v_
            asup_n += 1
        if bacc is not None:
            bacc_ema = bacc if bacc_ema is None else 0.95 * bacc_ema + 0.05 * bacc
            bl = batcher.bind_level
            if (bl is not None and bacc_ema > args.bind_raise_at and step - last_bind_raise >= 50
                    and bl < batcher.level):
                batcher.bind_level = min(batcher.level, bl + (1 if bl < 8 else 2))
                last_bind_raise = step
                log("curriculum: bind facts up to", batcher.bind_level, "(bind value acc %.2f)" % bacc_ema)
        if oacc is not None:
            oacc_ema = 0.95 * oacc_ema + 0.05 * oacc
        if cons is not None:
            cons_acc += cons
            cons_n += 1
        if dacc is not None:
            acc_ema = 0.95 * acc_ema + 0.05 * dacc
            if acc_ema > args.raise_at and step - last_raise >= 50 and batcher.level < args.max_facts:
                batcher.level = min(args.max_facts, batcher.level + (1 if batcher.level < 8 else 2))
                last_raise = step
                log("curriculum: docqa facts up to", batcher.level, "(train value acc %.2f)" % acc_ema)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if fixed is not None:
            fixed.apply()
        step += 1
        t1 = time.time()
        done_s += t1 - t_seg
        t_seg = t1
        loss_acc += loss.item()
        n_acc += 1
        tok_acc += int(valid.sum())
        if step % 10 == 0 and args.adaptive_threads and dev.type == "cpu":
            # C++ builds share the 2 cores: OpenMP barriers collapse under
            # oversubscription, so drop to 1 thread while the machine is busy.
            nt = 1 if os.getloadavg()[0] > args.threads + 1.0 else args.threads
            if nt != torch.get_num_threads():
                torch.set_num_threads(nt)
                log("threads ->", nt, "load %.1f" % os.getloadavg()[0])
        if step % 25 == 0:
            el = t1 - t_start
            log("step %d loss %.4f lr %.2e facts<=%d docqa_train_acc %.2f other_first_acc %.2f train_min %.1f tok/batch %d steps/s %.3f%s" % (
                step, loss_acc / n_acc, lr, batcher.level, acc_ema, oacc_ema, done_s / 60, tok_acc // n_acc, n_acc / max(1e-9, el_prev(el)),
                (" kv_cons %.4f" % (cons_acc / cons_n) if cons_n else "") +
                (" att_nll " + " ".join("%s %.2f" % (k_, v_ / asup_n) for k_, v_ in asup_acc.items())
                 if asup_n else "") +
                (" bind_acc %.2f" % bacc_ema if bacc_ema is not None else "") +
                (" bind_facts<=%d" % batcher.bind_level if batcher.bind_level is not None else "")))
            loss_acc, n_acc, tok_acc = 0.0, 0, 0
            cons_acc, cons_n = 0.0, 0
            asup_acc, asup_n = {}, 0
        if t1 - last_save > args.save_every * 60:
            save()
            last_save = time.time()
        if eval_set and t1 - last_eval > args.eval_every * 60:
            te = time.time()
            acc, ex = evaluate(model, tok, eval_set, args.gen_length, args.eval_steps)
            log("EVAL step %d " % step + " ".join("%s=%.3f" % (f, a) for f, a in acc.items()),
                "(%.0fs)" % (time.time() - te), "examples:", json.dumps(ex))
            last_eval = time.time()
            t_seg = time.time()  # do not count eval time as training time
    save()
    log("stopped at step %d after %d steps, %.1f min, last lr %.2e" % (
        step, step - step0, (time.time() - t_start) / 60, opt.param_groups[0]["lr"]))
    if not eval_set:
        return
    acc, ex = evaluate(model, tok, eval_set, args.gen_length, args.eval_steps)
    log("FINAL EVAL step %d " % step + " ".join("%s=%.3f" % (f, a) for f, a in acc.items()), json.dumps(ex))


_last = [None]


def el_prev(el):
    """seconds since the previous log line"""
    prev = _last[0] if _last[0] is not None else 0.0
    _last[0] = el
    return el - prev


if __name__ == "__main__":
    main()
