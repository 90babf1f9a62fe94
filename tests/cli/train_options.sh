#!/usr/bin/env bash
# tools/train/train.py --rule-q / --arith-q / --doc-q: a training row carries the requested number of
# questions (each answer masked: one answer start per question); --p-bind: docqa rows whose document
# uses at most two attributes, so every question has several candidate values of its type, with
# their fact-count curriculum (--bind-start) and templates (--bind-templates); and a malformed range
# is refused by name before any training starts; --bind-q (questions per binding row); the positions
# --att-sup / --rule-sup supervise (Batcher.docqa_links, rule_links) and that those attention terms
# are learnable, and measure a trained model's circuit (the committed model); --p-drill / --drill-q / --drill-ops
# (arithmetic drill rows), --p-named (rule rows that name their rule), --p-worked (rule rows
# whose answers give the rule's letter before '####'), --rule-batches / --rule-batch-q (steps of short
# rule rows only), --drill-batches / --drill-batch-q (steps of add/sub drill rows only); --t-min (the lowest answer mask ratio); the tokenizer JSON's pre-tokenizer
# ("gpt2" / "gpt2-digits") through export to the engine, an unknown one refused; --fourier (the number
# tokens' fixed Fourier dims); --device (an unknown or unavailable device refused by name).
# Usage: train_options.sh <bicache binary> <source dir>
set -euo pipefail
SRC="$2"
PY=/usr/bin/python3
export OMP_NUM_THREADS=1
fail=0

# refuse_with PATTERN ARG...: train.py ARG... --minutes 0 must exit non-zero before training, its
# message matching PATTERN.
refuse_with() {
  local want=$1 out
  shift
  if out=$("$PY" "$SRC/tools/train/train.py" "$@" --minutes 0 2>&1); then
    echo "FAIL $* accepted"; fail=1
  elif grep -q "$want" <<<"$out"; then
    echo "ok   $* refused: $(tail -1 <<<"$out")"
  else
    echo "FAIL $*: unexpected output: $out"; fail=1
  fi
}
# refuse OPTION BAD PATTERN: the same, for a value argparse rejects ("argument OPTION: PATTERN").
refuse() { refuse_with "argument $1: $3" "$1" "$2"; }

"$PY" - "$SRC" <<'EOF' || fail=1
import sys
sys.path.insert(0, sys.argv[1] + "/tools/train")
import bpe
import train

tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
for fam, attr, want in (("rule", "rule_q", 7), ("arith", "arith_q", 5)):
    b = train.Batcher(tok, 5, set(), 32)
    b.p_doc = 0.0
    b.p_rule = 1.0 if fam == "rule" else 0.0
    setattr(b, attr, (want, want))
    for _ in range(3):
        ids, is_ans, first, plen, got_fam, _ = b.sample(0.0)
        assert got_fam == fam, got_fam
        assert sum(first) == want, (fam, sum(first), want)
    print("ok   %s rows carry %s=(%d,%d) -> %d masked answers" % (fam, attr, want, want, want))
EOF

"$PY" - "$SRC" <<'EOF' || fail=1
import re
import sys
sys.path.insert(0, sys.argv[1] + "/tools/train")
import bpe
import suite
import train

tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
attr_re = "|".join(suite.ATTR_NAMES)


def facts_of(ids):
    """(entity, attribute) of every fact sentence of a docqa row's document."""
    doc = tok.decode(ids, skip_special=True).split("Facts: ")[1].split("\n")[0]
    out = []
    for sent in doc.split(". "):
        a = re.search(r"\b(%s)\b" % attr_re, sent).group(1)
        e = next(w for w in re.findall(r"[A-Z][a-z]+", sent) if w in suite.NAMES)
        out.append((e, a))
    return out


def rows(p_bind, doc_q, n=40):
    b = train.Batcher(tok, 11, set(), 32)
    b.p_doc, b.p_bind, b.doc_q, b.level = 1.0, p_bind, doc_q, 24
    return [b.sample(0.0) for _ in range(n)]


def askable(fs):
    """Facts a training question can ask (some phrasings of a fact are held out)."""
    return sum(any(not suite.is_heldout_question(t.format(a=a, n=e)) for t in suite.QUESTION_TEMPLATES)
               for e, a in fs)


# --doc-q: as many masked answers as asked, or one per askable fact when there are fewer.
for ids, _, first, _, fam, _ in rows(0.0, (11, 11)):
    assert fam == "docqa", fam
    fs = facts_of(ids)
    assert sum(first) == min(11, askable(fs)), (sum(first), askable(fs), len(fs))
print("ok   docqa rows carry --doc-q 11,11 -> min(11, askable facts) masked answers")

# --p-bind 1: every document uses at most two attributes (values of the asked type abound),
# with distinct entity/attribute pairs; --p-bind 0 documents of >= 8 facts use more.
many = 0
for ids, _, first, _, fam, _ in rows(1.0, (4, 8)):
    assert fam == "docqa-bind", fam
    fs = facts_of(ids)
    assert len({a for _, a in fs}) <= 2, fs
    assert len(set(fs)) == len(fs), fs
    many += len(fs) >= 8
assert many > 0, "no bind document of >= 8 facts drawn"
for ids, _, _, _, fam, _ in rows(0.0, (4, 8)):
    fs = facts_of(ids)
    if len(fs) >= 8:
        assert len({a for _, a in fs}) > 2, fs
print("ok   --p-bind 1 documents use <= 2 attributes (%d of 40 with >= 8 facts); --p-bind 0 ones more" % many)

# --bind-start: the bind rows' documents stay within 2..bind_level facts (the other docqa rows
# follow the docqa level).
b = train.Batcher(tok, 12, set(), 32)
b.p_doc, b.p_bind, b.level, b.bind_level = 1.0, 0.5, 24, 4
sizes = {"docqa": [], "docqa-bind": []}
for _ in range(60):
    ids, _, _, _, fam, _ = b.sample(0.0)
    sizes[fam].append(len(facts_of(ids)))
assert sizes["docqa-bind"] and all(2 <= n <= 4 for n in sizes["docqa-bind"]), sizes
assert max(sizes["docqa"]) > 4, sizes
print("ok   bind_level 4 keeps bind documents at 2-4 facts (%d rows), docqa rows up to %d"
      % (len(sizes["docqa-bind"]), max(sizes["docqa"])))

# --bind-templates 0: bind documents use only FACT_TEMPLATES[0] ("The {a} of {n} is {v}.").
b = train.Batcher(tok, 13, set(), 32)
b.p_doc, b.p_bind, b.level, b.bind_level, b.bind_templates = 1.0, 1.0, 24, 6, [0]
for _ in range(20):
    ids = b.sample(0.0)[0]
    doc = tok.decode(ids, skip_special=True).split("Facts: ")[1].split("\n")[0]
    assert all(sent.startswith("The ") for sent in doc.split(". ")), doc
print("ok   bind_templates [0] -> every bind fact reads 'The <attr> of <name> is <value>.'")

# --bind-q 1,1: bind rows ask one question (the other docqa rows keep --doc-q).
b = train.Batcher(tok, 14, set(), 32)
b.p_doc, b.p_bind, b.level, b.bind_level, b.doc_q, b.bind_q = 1.0, 0.5, 24, 6, (6, 6), (1, 1)
seen = set()
for _ in range(30):
    ids, _, first, _, fam, _ = b.sample(0.0)
    seen.add(fam)
    if fam == "docqa-bind":
        assert sum(first) == 1, sum(first)
    else:
        assert sum(first) == min(6, askable(facts_of(ids))), sum(first)
assert seen == {"docqa", "docqa-bind"}, seen
print("ok   --bind-q 1,1 -> bind rows carry one masked answer, docqa rows keep --doc-q")
EOF

# --p-drill / --p-named: the training-only rows. A drill row asks --drill-q single arithmetic steps
# and answers each in arith's format with the right result; a named rule row's instruction names a
# rule that maps every one of its examples; neither kind appears without the flag.
"$PY" - "$SRC" <<'EOF' || fail=1
import re
import sys
sys.path.insert(0, sys.argv[1] + "/tools/train")
import bpe
import suite
import train

tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}
b = train.Batcher(tok, 21, set(), 32)
b.p_doc, b.p_rule, b.p_drill, b.drill_q = 0.0, 0.0, 0.5, (9, 9)
kinds, steps = set(), 0
for _ in range(30):
    ids, _, first, plen, fam, links = b.sample(0.0)
    kinds.add(fam)
    if fam != "arith-drill":
        continue
    assert sum(first) == 9 and not links, (sum(first), links)
    text = tok.decode(ids, skip_special=True)
    qa = re.findall(r"What is (\d+) ([-+*]) (\d+)\?\s*(\d+) ([-+*]) (\d+) = (\d+)\. #### (\d+)", text)
    assert len(qa) == 9, text
    for x, op, y, x2, op2, y2, r, r2 in qa:
        assert (x, op, y) == (x2, op2, y2) and r == r2, (x, op, y, x2, op2, y2, r, r2)
        assert OPS[op](int(x), int(y)) == int(r) and 0 <= int(r) <= 99, (x, op, y, r)
        steps += 1
assert kinds == {"arith", "arith-drill"}, kinds
print("ok   --p-drill 0.5 -> arith and drill rows; %d drill steps, each answered right" % steps)

# --drill-ops: drill rows ask only the operations named (the word problems keep all three).
b = train.Batcher(tok, 24, set(), 32)
b.p_doc, b.p_rule, b.p_drill, b.drill_q, b.drill_ops = 0.0, 0.0, 1.0, (12, 12), "+-"
seen = set()
for _ in range(20):
    ids, _, _, _, fam, _ = b.sample(0.0)
    assert fam == "arith-drill", fam
    seen |= set(re.findall(r"What is \d+ ([-+*]) \d+\?", tok.decode(ids, skip_special=True)))
assert seen == {"+", "-"}, seen
print("ok   --drill-ops +- -> drill rows ask only + and - (%d rows)" % 20)

# --t-min: the share of answer tokens masked (the positions the model is asked for) is at least
# about T_MIN on every SFT row; without it rows with few masked answer tokens occur.
import torch
from model import LLaDA, default_config


class Recorder(torch.nn.Module):
    """Wraps a model and keeps the masked positions (select) of the last call."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x, valid, select=None, **kw):
        self.select = select
        return self.inner(x, valid, select=select, **kw)


torch.manual_seed(0)
rec = Recorder(LLaDA(dict(default_config(tok.n_vocab), n_layer=2)))
b = train.Batcher(tok, 25, set(), 32)
b.p_doc, b.p_rule, b.rule_q = 0.0, 1.0, (12, 12)
ids, is_ans, valid, first, isdoc, plen, isbind, links = b.batch(8, 0.0)
low = {}
for t_min in (0.0, 0.8):
    shares = []
    for seed in range(6):
        with torch.no_grad():
            train.diffusion_loss(rec, ids, is_ans, valid, tok.special["<|mask|>"], torch.Generator().manual_seed(seed),
                                 p_full=0.0, first=first, isdoc=isdoc, plen=plen, eps=max(train.T_EPS, t_min))
        shares += (rec.select & is_ans).sum(1).div(is_ans.sum(1)).tolist()
    low[t_min] = min(shares)
assert low[0.0] < 0.5 and low[0.8] > 0.65, low
print("ok   --t-min 0.8: fewest answer tokens masked in a row %.2f (without: %.2f)" % (low[0.8], low[0.0]))

b = train.Batcher(tok, 22, set(), 32)
b.p_doc, b.p_rule, b.p_named = 0.0, 1.0, 0.5
kinds, named = set(), 0
for _ in range(30):
    ids, _, first, plen, fam, links = b.sample(0.0)
    kinds.add(fam)
    prefix = tok.decode(ids[:plen], skip_special=True)
    m = re.search(r"applies the rule (\w+)\.", prefix)
    assert (m is not None) == (fam == "rule-named"), (fam, prefix)
    if m:
        ex = re.findall(r"input: ([a-z ]+) -> output: ([a-z ]+)", prefix)
        f = suite.RULES[m.group(1)]
        assert ex and all(" ".join(f(i.split())) == o.strip() for i, o in ex), (m.group(1), ex)
        assert links, "named rule rows keep the --rule-sup links"
        named += 1
assert kinds == {"rule", "rule-named"}, kinds
print("ok   --p-named 0.5 -> %d named rule rows, each naming the rule its examples follow" % named)

# --rule-batches / --rule-batch-q: a batch drawn with only="rule" holds rule rows alone with
# rule_batch_q questions each (the named / worked shares still apply), so it is padded to a short rule
# row's length, not to a docqa document's; without it the mix (and rule_q) holds.
b = train.Batcher(tok, 26, set(), 32)
b.p_doc, b.p_rule, b.p_named, b.level = 0.6, 0.5, 0.5, 30
b.rule_q, b.rule_batch_q, b.doc_q = (8, 12), (2, 2), (8, 14)  # the phase-11 mix
for _ in range(5):
    _, _, first, _, fam, _ = b.sample(0.0, only="rule")
    assert fam.startswith("rule") and sum(first) == 2, (fam, sum(first))
mixed = b.batch(16, 0.0)
ruled = b.batch(16, 0.0, only="rule")
texts = [tok.decode(r.tolist(), skip_special=True) for r in ruled[0]]
assert all("input: " in t and "Facts" not in t for t in texts), texts[0]
assert any("applies the rule" in t for t in texts) and not all("applies the rule" in t for t in texts)
mixed_texts = [tok.decode(r.tolist(), skip_special=True) for r in mixed[0]]
assert any("input: " not in t for t in mixed_texts), "the mix holds docqa / arith rows"
# 2 questions: at most 3 preamble sentences, 6 examples and 2 turns, one with the 32-token canvas
# (< 320 tokens); the mix's docqa rows of 8-14 questions are wider (the batcher is seeded).
assert ruled[0].shape[1] <= 320 and ruled[0].shape[1] < mixed[0].shape[1], (ruled[0].shape, mixed[0].shape)
print("ok   --rule-batches: a rule batch is %d tokens wide, a mixed one %d" % (ruled[0].shape[1], mixed[0].shape[1]))

# --drill-batches / --drill-batch-q: a batch drawn with only="arith-drill" holds drill rows alone,
# drill_batch_q questions each, asking only the --drill-ops operations, every answer right; the
# mix's own drill rows (--p-drill) keep drill_q.
b = train.Batcher(tok, 27, set(), 32)
b.p_doc, b.p_rule, b.p_drill, b.level = 0.35, 0.3, 0.4, 30
b.drill_q, b.drill_batch_q, b.drill_ops = (12, 16), (3, 3), "+-"
for _ in range(5):
    ids, _, first, _, fam, _ = b.sample(0.0, only="arith-drill")
    assert fam == "arith-drill" and sum(first) == 3, (fam, sum(first))
    text = tok.decode(ids, skip_special=True)
    steps = re.findall(r"What is (\d+) ([-+*]) (\d+)\?\s*(\d+) ([-+*]) (\d+) = (\d+)\. #### (\d+)", text)
    assert len(steps) == 3, text
    for x, op, y, x2, op2, y2, r, r2 in steps:
        assert (x, op, y) == (x2, op2, y2) and op in "+-" and r == r2, text
        assert int(r) == (int(x) + int(y) if op == "+" else int(x) - int(y)) and 0 <= int(r) <= 99, text
drilled = b.batch(16, 0.0, only="arith-drill")
texts = [tok.decode(r.tolist(), skip_special=True) for r in drilled[0]]
assert all("Work out each step." in t and "Facts" not in t and "input: " not in t for t in texts), texts[0]
assert drilled[0].shape[1] < 320 and not drilled[4].any(), drilled[0].shape
mix_drills = [sum(f) for _, _, f, _, fam, _ in (b.sample(0.0) for _ in range(60)) if fam == "arith-drill"]
assert mix_drills and all(12 <= n <= 16 for n in mix_drills), mix_drills
print("ok   --drill-batches: a drill batch is %d tokens wide, 3 add/sub steps per row; the mix's %d drill rows "
      "ask 12-16" % (drilled[0].shape[1], len(mix_drills)))

# --p-worked: the other rule rows answer "rule T. #### OUTPUT" with T the letter of a rule that maps
# every example and OUTPUT its result on the query; every token before "####" is an always-masked target
# (so no turn's rule letter is visible to another), and the --rule-sup links join the output letters
# after the marker to the query letters.
b = train.Batcher(tok, 24, set(), 32)
b.p_doc, b.p_rule, b.p_named, b.p_worked = 0.0, 1.0, 0.3, 1.0
kinds, worked = set(), 0
marker = tok.encode(" ####")[0]
for _ in range(30):
    ids, _, first, plen, fam, links = b.sample(0.0)
    kinds.add(fam)
    if fam != "rule-worked":
        continue
    text = tok.decode(ids, skip_special=True)
    ex = re.findall(r"input: ([a-z ]+) -> output: ([a-z ]+)\n", text + "\n")
    qa = re.findall(r"input: ([a-z ]+) -> output:\s+rule ([A-Z])\. #### ([a-z ]+)", text)
    assert ex and qa and ("Name its letter" in text or "give its letter" in text), text
    for x, label, y in qa:
        name = suite.RULE_OF_LABEL[label]
        f = suite.RULES[name]
        assert all(" ".join(f(i.split())) == o.strip() for i, o in ex), (name, ex)
        assert " ".join(f(x.split())) == y.strip(), (name, x, y)
    masked = tok.decode([t for t, f1 in zip(ids, first) if f1], skip_special=True)
    assert masked == "".join(" rule %s." % label for _, label, _ in qa), masked
    outs = {o for o, _ in links}
    assert all(ids[o - 1] == marker or o - 1 in outs for o in outs), "a link before the marker"
    assert len(outs) == sum(len(y.split()) for _, _, y in qa), (len(outs), qa)
    worked += 1
assert kinds == {"rule-named", "rule-worked"} and worked, kinds
print("ok   --p-worked 1 -> %d worked rule rows: the rule of the letter maps the examples, the letter masked, links after '####'" % worked)

b = train.Batcher(tok, 23, set(), 32)
b.p_doc = 0.3
assert {b.sample(0.0)[4] for _ in range(40)} <= {"docqa", "docqa-bind", "rule", "arith"}
print("ok   without the flags no drill, named or worked rows")
EOF

# docqa_links (the positions --att-sup supervises): one link per docqa question; its fact is the
# prefix sentence holding the asked entity and the answer value, its entity the one the question
# names; rule and arith rows have none.
"$PY" - "$SRC" <<'EOF' || fail=1
import sys
sys.path.insert(0, sys.argv[1] + "/tools/train")
import bpe
import train

tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
b = train.Batcher(tok, 15, set(), 32)
b.p_doc, b.p_bind, b.level, b.doc_q = 1.0, 0.3, 24, (4, 10)
dot = tok.encode(".")[0]
n = 0
for _ in range(40):
    ids, _, first, plen, fam, links = b.sample(0.0)
    assert len(links) == sum(first), (len(links), sum(first))
    for a, q, fv, fe in links:
        assert fe < fv < plen <= q < a, (fe, fv, plen, q, a)
        assert ids[fv] == ids[a] and ids[fe] == ids[q], "link does not join the asked entity's value"
        assert dot not in ids[fe:fv], "entity and value from different sentences"
        assert tok.special["<|user|>"] in ids[q - 10:q], "question entity outside the question"
        n += 1
print("ok   docqa_links: %d links, each joins an answer to its fact's entity and value" % n)

# rule_links: every answer letter of a rule row links to a letter of its own query input, the same
# letter (copying rules) or the one before it (shift); arith rows have no links.
b = train.Batcher(tok, 18, set(), 32)
b.p_doc, b.p_rule, b.rule_q = 0.0, 1.0, (3, 5)
n = 0
for _ in range(40):
    ids, _, first, plen, fam, links = b.sample(0.0)
    assert fam == "rule" and links, fam
    starts = [p for p in range(len(ids)) if first[p]]
    for o, s in links:
        a = max(p for p in starts if p <= o)
        assert plen <= s < a <= o, (s, a, o)
        lo, ls = tok.decode([ids[o]]).strip(), tok.decode([ids[s]]).strip()
        assert lo == ls or lo == chr((ord(ls) - 97 + 1) % 26 + 97), (lo, ls)
        n += 1
b.p_rule = 0.0
for _ in range(10):
    assert b.sample(0.0)[5] == [], "links on an arith row"
print("ok   rule_links: %d links, each joins an answer letter to its source letter in the query" % n)
EOF

# --att-sup: the supervised attention (answer slot -> question entity, value -> its entity,
# answer slot -> the asked value) and the entity-identity term are learnt on a fixed batch.
"$PY" - "$SRC" <<'EOF' || fail=1
import sys
import torch
sys.path.insert(0, sys.argv[1] + "/tools/train")
import bpe
import train
from model import LLaDA, default_config

torch.manual_seed(0)
torch.set_num_threads(1)
tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
m = LLaDA(dict(default_config(tok.n_vocab), n_layer=4))
b = train.Batcher(tok, 17, set(), 32)
b.p_doc, b.level, b.doc_q = 1.0, 6, (4, 6)
ids, is_ans, valid, first, isdoc, plen, isbind, links = b.batch(4, 0.0)
opt = torch.optim.Adam(m.parameters(), lr=3e-3)
hist = []
for step in range(40):
    g = torch.Generator().manual_seed(step)
    loss, _, _, _, _, parts = train.diffusion_loss(m, ids, is_ans, valid, tok.special["<|mask|>"], g,
                                                   p_full=0.0, first=first, isdoc=isdoc, isbind=isbind,
                                                   plen=plen, links=links, att_sup=1.0, att_layers=(1, 2))
    assert parts is not None and set(parts) == {"q-ent", "v-ent", "a-val", "ident"}, parts
    parts = [parts[k] for k in ("q-ent", "v-ent", "a-val", "ident")]
    hist.append(parts)
    opt.zero_grad()
    loss.backward()
    opt.step()
names = ("answer->question entity", "value->its entity", "answer->value", "entity identity")
for nm, u, w in zip(names, hist[0], hist[-1]):
    print("     %-24s nll %.2f -> %.2f" % (nm, u, w))
assert hist[-1][0] < 0.5 * hist[0][0] and hist[-1][1] < 0.5 * hist[0][1], (hist[0], hist[-1])
assert hist[-1][2] < hist[0][2], (hist[0], hist[-1])
_, _, _, _, _, parts = train.diffusion_loss(m, ids, is_ans, valid, tok.special["<|mask|>"],
                                            torch.Generator().manual_seed(0), first=first, isdoc=isdoc,
                                            plen=plen, links=links, att_sup=0.0)
assert parts is None
print("ok   --att-sup terms fall on a fixed batch (4-layer model, 40 steps); none without it")

b = train.Batcher(tok, 19, set(), 32)
b.p_doc, b.p_rule, b.rule_q = 0.0, 1.0, (3, 4)
ids, is_ans, valid, first, isdoc, plen, isbind, links = b.batch(4, 0.0)
hist = []
for step in range(30):
    g = torch.Generator().manual_seed(step)
    loss, _, _, _, _, parts = train.diffusion_loss(m, ids, is_ans, valid, tok.special["<|mask|>"], g,
                                                   p_full=0.0, first=first, isdoc=isdoc, plen=plen,
                                                   links=links, rule_sup=1.0, rule_layer=3)
    assert parts is not None and set(parts) == {"rule"}, parts
    hist.append(parts["rule"])
    opt.zero_grad()
    loss.backward()
    opt.step()
print("     %-24s nll %.2f -> %.2f" % ("rule letter->source", hist[0], hist[-1]))
assert hist[-1] < 0.5 * hist[0], hist
print("ok   --rule-sup term falls on a fixed batch of rule rows")
EOF

# The entity-identity term of --att-sup measures what it is meant to: on the committed model
# (trained with it: its layer-1 gathering head's output names the entity read) it is near 0; on a
# fresh model, whose head outputs do not tell entities apart, it is log(values / same-entity
# values) ~1. (A fresh small model cannot show the term *training*: its head's outputs for
# different entities have cosine 0.99-1.00, docs/model.md.)
"$PY" - "$SRC" <<'EOF' || fail=1
import sys
import torch
sys.path.insert(0, sys.argv[1] + "/tools/train")
import bpe
import import_gguf
import train
from model import LLaDA, default_config

torch.manual_seed(0)
torch.set_num_threads(1)
tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
cfg = default_config(tok.n_vocab)
b = train.Batcher(tok, 31, set(), 32)
b.p_doc, b.level, b.doc_q = 1.0, 12, (6, 8)
ids, is_ans, valid, first, isdoc, plen, isbind, links = b.batch(6, 0.0)


def parts(m):
    with torch.no_grad():
        out = train.diffusion_loss(m, ids, is_ans, valid, tok.special["<|mask|>"], torch.Generator().manual_seed(0),
                                   p_full=0.0, first=first, isdoc=isdoc, isbind=isbind, plen=plen, links=links,
                                   att_sup=1.0, att_layers=(1, 3))
    return out[-1]


trained = import_gguf.model_from_gguf(sys.argv[1] + "/models/tiny-llada.gguf", cfg)
fresh = LLaDA(cfg)
pt, pf = parts(trained), parts(fresh)
print("     committed model: %s" % {k: round(v, 3) for k, v in pt.items()})
print("     fresh model:     %s" % {k: round(v, 3) for k, v in pf.items()})
assert pt["ident"] < 0.2 and pf["ident"] > 0.5, (pt, pf)
assert pt["q-ent"] < 0.2 and pt["a-val"] < 0.5 and pf["q-ent"] > 2.0, (pt, pf)
print("ok   --att-sup terms: near 0 on the committed model (ident %.3f), high on a fresh one (ident %.3f)"
      % (pt["ident"], pf["ident"]))
EOF

# The tokenizer JSON's "pre": export.py writes it to tokenizer.ggml.pre and the engine splits by it
# (the committed model's weights re-exported with "gpt2-digits" tokenize "63 - 4 = 59" as bpe.py
# does, one digit per token); a name bpe.py does not know is refused by name, by bpe.py and by
# train.py before training.
TOKDIR=$(mktemp -d)
trap 'rm -rf "$TOKDIR"' EXIT
"$PY" - "$SRC" "$TOKDIR" <<'EOF' || fail=1
import importlib.util
import json
import sys
sys.path.insert(0, sys.argv[1] + "/tools/train")
import bpe
import import_gguf
from model import default_config

src, out = sys.argv[1], sys.argv[2]
tok_json = json.load(open(src + "/tools/train/tokenizer.json"))
digits = dict(tok_json, pre="gpt2-digits")
json.dump(dict(tok_json, pre="gpt2-nodigits"), open(out + "/bad.json", "w"))
try:
    bpe.Tokenizer.load(out + "/bad.json")
    raise SystemExit("FAIL unknown pre accepted")
except ValueError as e:
    assert "gpt2-nodigits" in str(e), e
    print("ok   bpe.Tokenizer refuses pre 'gpt2-nodigits': %s" % e)
spec = importlib.util.spec_from_file_location("train_export", src + "/tools/train/export.py")
train_export = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train_export)
cfg = default_config(len(tok_json["tokens"]))
sd = import_gguf.state_dict_from_gguf(src + "/models/tiny-llada.gguf", cfg)
import_gguf._gguf_export().export_llada(sd, dict(cfg, name="digits"), train_export.gguf_tokenizer(digits),
                                        out + "/digits.gguf", dtype="bf16", name="digits")
text = "63 - 4 = 59"
want = bpe.Tokenizer(digits).encode(text)
assert want != bpe.Tokenizer(tok_json).encode(text)
open(out + "/text.txt", "w").write(text + "\n")
open(out + "/want.txt", "w").write(",".join(map(str, want)) + "\n")
EOF
if "$1" tokenize -m "$TOKDIR/digits.gguf" --file "$TOKDIR/text.txt" >"$TOKDIR/got.txt" &&
    cmp -s "$TOKDIR/got.txt" "$TOKDIR/want.txt"; then
  echo "ok   exported pre gpt2-digits: the engine tokenizes '63 - 4 = 59' as bpe.py ($(cat "$TOKDIR/got.txt"))"
else
  echo "FAIL exported pre gpt2-digits: engine $(cat "$TOKDIR/got.txt" 2>/dev/null), bpe.py $(cat "$TOKDIR/want.txt" 2>/dev/null)"
  fail=1
fi
refuse_with "pre-tokenizer 'gpt2-nodigits' is not one of" --tokenizer "$TOKDIR/bad.json" --ckpt-dir "$TOKDIR/ck"

# --steps: a step budget that stops training whichever of it and --minutes comes first, saving the
# checkpoint at the step reached; a resumed run counts its own steps. With --new-cycle the cosine
# cycle spans the steps: the second of 2 steps is halfway, lr 1e-3 * warmup 2/50 * (0.1 + 0.9 *
# 0.5) = 2.20e-05 (a 30-minute cycle would still be at its start, ~4.00e-05).
STEPDIR="$TOKDIR/steps"
for want in 2 3; do
  n=$((want == 2 ? 2 : 1))
  if out=$("$PY" "$SRC/tools/train/train.py" --ckpt-dir "$STEPDIR" $([ "$want" = 2 ] && echo --fresh) --steps "$n" \
      --new-cycle --minutes 30 --batch 4 --eval-n 0 --threads 1 --precision f32 2>&1) &&
      grep -q "stopped at step $want after $n steps" <<<"$out" &&
      { [ "$want" != 2 ] || grep -q "last lr 2.20e-05" <<<"$out"; } &&
      [ "$("$PY" -c 'import sys, torch; print(torch.load(sys.argv[1])["step"])' "$STEPDIR/latest.pt")" = "$want" ]; then
    echo "ok   --steps $n stops at step $want and saves it"
  else
    echo "FAIL --steps $n: expected a checkpoint at step $want: $(tail -3 <<<"$out")"; fail=1
  fi
done

# --cycle-steps: the cycle spans 4 steps while --steps 2 stops at the second, a quarter of the way:
# lr 1e-3 * warmup 2/50 * (0.1 + 0.9 * 0.5 * (1 + cos(pi / 4))) = 3.47e-05 (2.20e-05 above without it).
# Without --steps or --new-cycle it is refused.
if out=$("$PY" "$SRC/tools/train/train.py" --ckpt-dir "$TOKDIR/cycle" --fresh --steps 2 --cycle-steps 4 \
    --new-cycle --minutes 30 --batch 4 --eval-n 0 --threads 1 --precision f32 2>&1) &&
    grep -q "stopped at step 2 after 2 steps.*last lr 3.47e-05" <<<"$out"; then
  echo "ok   --cycle-steps 4 with --steps 2 stops a quarter into its cycle"
else
  echo "FAIL --cycle-steps 4 --steps 2: $(tail -3 <<<"$out")"; fail=1
fi
for extra in "" "--steps 2" "--new-cycle"; do
  # shellcheck disable=SC2086
  refuse_with "cycle-steps needs --steps and --new-cycle" --cycle-steps 4 $extra
done

# --fourier K: after a training step (AdamW with weight decay) the number tokens' last 2K dims of the
# embedding and the output head hold the Fourier table; the other tokens' dims there still train.
FDIR="$TOKDIR/fourier"
if out=$("$PY" "$SRC/tools/train/train.py" --ckpt-dir "$FDIR" --fresh --steps 1 --fourier 4 --fourier-amp 0.2 \
    --minutes 30 --batch 4 --eval-n 0 --threads 1 --precision f32 2>&1) &&
    grep -q "fourier: number tokens' last 8 dims fixed (amplitude 0.2)" <<<"$out" &&
    "$PY" - "$SRC" "$FDIR/latest.pt" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1] + "/tools/train")
import torch
import bpe
import fourier
tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
m = torch.load(sys.argv[2])["model"]
nums = fourier.number_ids(tok)
others = torch.ones(tok.n_vocab, dtype=torch.bool)
others[nums] = False
for name in ("tok_emb.weight", "lm_head.weight"):
    assert torch.equal(m[name][nums, -8:], fourier.fourier_table(4, 0.2)), name
    assert float(m[name][others, -8:].abs().mean()) > 1e-3, name
EOF
then
  echo "ok   --fourier 4: the number rows' last 8 dims hold the table after a step, the others train"
else
  echo "FAIL --fourier 4: $(tail -3 <<<"$out")"; fail=1
fi

for opt in --rule-q --doc-q --bind-q --drill-q --rule-batch-q --drill-batch-q; do
  for bad in "5,3" "0,2" "four" "1,2,3"; do refuse "$opt" "$bad" "expected"; done
done
for bad in "7" "-1" "0,x"; do refuse --bind-templates "$bad" "\(template indices\|expected\)"; done
for bad in "3,1" "0,8" "x" "1"; do refuse --att-layers "$bad" "\(need\|expected\)"; done
for bad in "8" "-1" "x"; do refuse --rule-layer "$bad" "\(need\|expected\)"; done
for bad in "" "/" "++" "+x"; do refuse --drill-ops "$bad" "expected operations"; done
for bad in "1.5" "-0.1" "most"; do refuse --t-min "$bad" "expected a share"; done
for opt in --p-drill --p-named --p-worked --rule-batches --drill-batches; do
  for bad in "1.5" "-0.1" "half"; do refuse "$opt" "$bad" "expected a share"; done
done
for bad in "fp16" "BF16"; do refuse --precision "$bad" "invalid choice"; done
for bad in "0" "-3" "2.5" "many"; do refuse --steps "$bad" "expected a positive integer"; done
for bad in "0" "many"; do refuse --cycle-steps "$bad" "expected a positive integer"; done
refuse_with "sum to more than 1" --rule-batches 0.6 --drill-batches 0.5
for bad in "-1" "2.5" "all"; do refuse --eval-n "$bad" "expected a whole number"; done
for bad in "17" "-1" "x"; do refuse --fourier "$bad" "\(invalid choice\|invalid int value\)"; done
for bad in "-0.1" "0" "inf" "x"; do refuse --fourier-amp "$bad" "expected a positive number"; done
# --device: an unknown device is refused by name; cuda is refused with its reason where this PyTorch
# has no CUDA device (CI's machines), before any model is built.
for bad in "tpu" "gpu" "cuda0" "cuda:x" "cuda:"; do refuse --device "$bad" "must be cpu, cuda or cuda:N, got '$bad'"; done
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  refuse_with "device cuda: this PyTorch sees no CUDA device" --device cuda
fi
# Sizes, rates and budgets: out of range is refused by name before any work (these raised
# ZeroDivisionError or an empty-range error from inside the run, some minutes in for the evals).
for opt in --batch --warmup --threads --gen-length --eval-steps --level --iso-max; do
  for bad in "0" "-2" "x"; do refuse "$opt" "$bad" "expected a positive integer"; done
done
for opt in --lr --eval-every --save-every; do
  for bad in "0" "-1" "inf"; do refuse "$opt" "$bad" "expected a positive number"; done
done
for bad in "-3" "nan"; do refuse --minutes "$bad" "expected a number >= 0"; done
for opt in --p-doc --p-rule --p-full --p-bind --raise-at; do refuse "$opt" "1.5" "expected a share"; done

# The other tools: a missing, foreign or damaged file is a one-line error naming it, not a traceback.
# tool_refuses PATTERN TOOL ARG...
tool_refuses() {
  local want=$1 tool=$2 out
  shift 2
  if out=$("$PY" "$SRC/tools/train/$tool" "$@" 2>&1); then
    echo "FAIL $tool $* accepted"; fail=1
  elif grep -q "$want" <<<"$out" && ! grep -q Traceback <<<"$out"; then
    echo "ok   $tool $* refused: $(tail -1 <<<"$out")"
  else
    echo "FAIL $tool $*: wanted '$want' without a traceback, got:"; tail -5 <<<"$out"; fail=1
  fi
}
BADDIR=$(mktemp -d)
head -c 3000 "$SRC/models/tiny-llada.gguf" >"$BADDIR/cut.gguf"
echo "not a checkpoint" >"$BADDIR/junk.pt"
tool_refuses "no checkpoint at $BADDIR/none.pt" export.py --ckpt "$BADDIR/none.pt" --out "$BADDIR/o.gguf"
tool_refuses "cannot read checkpoint $BADDIR/junk.pt" export.py --ckpt "$BADDIR/junk.pt" --out "$BADDIR/o.gguf"
tool_refuses "invalid choice: 'q4'" export.py --dtype q4
tool_refuses "no checkpoint at $BADDIR/none.pt" check_engine.py --ckpt "$BADDIR/none.pt"
tool_refuses "cannot read $BADDIR/junk.pt as GGUF" import_gguf.py --gguf "$BADDIR/junk.pt" --out "$BADDIR/x.pt"
tool_refuses "cannot read.*cut.gguf" import_gguf.py --gguf "$BADDIR/cut.gguf" --out "$BADDIR/x.pt"
tool_refuses "does not have the embedded model's shape: n_layer 2" import_gguf.py \
  --gguf "$SRC/tests/data/golden/llada-tiny.gguf" --out "$BADDIR/x.pt"
rm -rf "$BADDIR"

# precision.py: --precision auto takes bf16 autocast only where /proc/cpuinfo names a native bf16
# dot product (emulated bf16 ran ~50x slower than f32 on an AVX2-only CPU); f32 runs no autocast.
"$PY" - "$SRC" <<'EOF' || fail=1
import os
import sys
import tempfile
sys.path.insert(0, sys.argv[1] + "/tools/train")
import torch
import precision

d = tempfile.mkdtemp()
cases = {"avx2 fma f16c": "f32", "avx512f avx512_bf16 avx512bw": "bf16", "avx512f amx_tile amx_bf16": "bf16",
         "avx512f avx512bw": "f32"}
path = os.path.join(d, "cpuinfo")
for flags, want in cases.items():
    with open(path, "w") as f:
        f.write("processor\t: 0\nflags\t\t: fpu sse2 %s\n" % flags)
    got = precision.resolve("auto", path)
    assert got == want, (flags, got, want)
    assert precision.resolve("f32", path) == "f32" and precision.resolve("bf16", path) == "bf16"
assert precision.resolve("auto", os.path.join(d, "missing")) == "f32"
# on a CUDA device (train.py --device cuda) auto is bf16 whatever the CPU has
assert precision.resolve("auto", path, device_type="cuda") == "bf16"
assert precision.resolve("f32", path, device_type="cuda") == "f32"
try:
    precision.resolve("fp8")
    raise AssertionError("fp8 accepted")
except ValueError as e:
    assert "'fp8'" in str(e), e
a, b = torch.randn(4, 8), torch.randn(8, 3)
precision.set_mode("f32")
with precision.autocast():
    assert (a @ b).dtype == torch.float32
precision.set_mode("bf16")
with precision.autocast():
    assert (a @ b).dtype == torch.bfloat16
print("ok   precision: auto = bf16 only with avx512_bf16 / amx_bf16 (or on CUDA), f32 runs without autocast, bad names refused")
EOF
exit $fail
