#!/usr/bin/env bash
# tools/train/train.py --rule-q / --arith-q / --doc-q: a training row carries the requested number of
# questions (each answer masked: one answer start per question); --p-bind: docqa rows whose document
# uses at most two attributes, so every question has several candidate values of its type, with
# their fact-count curriculum (--bind-start) and templates (--bind-templates); and a malformed range
# is refused by name before any training starts.
# Usage: train_options.sh <bicache binary> <source dir>
set -euo pipefail
SRC="$2"
PY=/usr/bin/python3
export OMP_NUM_THREADS=1
fail=0

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
        ids, is_ans, first, plen, got_fam = b.sample(0.0)
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
for ids, _, first, _, fam in rows(0.0, (11, 11)):
    assert fam == "docqa", fam
    fs = facts_of(ids)
    assert sum(first) == min(11, askable(fs)), (sum(first), askable(fs), len(fs))
print("ok   docqa rows carry --doc-q 11,11 -> min(11, askable facts) masked answers")

# --p-bind 1: every document uses at most two attributes (values of the asked type abound),
# with distinct entity/attribute pairs; --p-bind 0 documents of >= 8 facts use more.
many = 0
for ids, _, first, _, fam in rows(1.0, (4, 8)):
    assert fam == "docqa-bind", fam
    fs = facts_of(ids)
    assert len({a for _, a in fs}) <= 2, fs
    assert len(set(fs)) == len(fs), fs
    many += len(fs) >= 8
assert many > 0, "no bind document of >= 8 facts drawn"
for ids, _, _, _, fam in rows(0.0, (4, 8)):
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
    ids, _, _, _, fam = b.sample(0.0)
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
EOF

for opt in --rule-q --doc-q; do
for bad in "5,3" "0,2" "four" "1,2,3"; do
  if out=$("$PY" "$SRC/tools/train/train.py" "$opt" "$bad" --minutes 0 2>&1); then
    echo "FAIL $opt $bad accepted"; fail=1
  elif grep -q "argument $opt: expected" <<<"$out"; then
    echo "ok   $opt $bad refused: $(tail -1 <<<"$out")"
  else
    echo "FAIL $opt $bad: unexpected output: $out"; fail=1
  fi
done
done
for bad in "7" "-1" "0,x"; do
  if out=$("$PY" "$SRC/tools/train/train.py" --bind-templates "$bad" --minutes 0 2>&1); then
    echo "FAIL --bind-templates $bad accepted"; fail=1
  elif grep -q "argument --bind-templates: \(template indices\|expected\)" <<<"$out"; then
    echo "ok   --bind-templates $bad refused: $(tail -1 <<<"$out")"
  else
    echo "FAIL --bind-templates $bad: unexpected output: $out"; fail=1
  fi
done
exit $fail
