#!/usr/bin/env bash
# tools/train/suite.py, the task-suite generator: the committed held-out suite is what the generator
# writes (seeded, byte for byte); training never emits a held-out prefix or question; every held-out
# answer follows from its prefix and prompt by a solver that reads only their text (docqa: the one
# fact sentence of the asked entity and attribute; rule: every rule of RULES that maps all the
# examples gives the answer on the query; arith: the problem replayed with the box size the prefix
# states); prefix ratios span 0.3..0.95; and the worked rule format (--rule-worked) changes only the
# rule samples' instruction and answers ("rule T. #### OUTPUT", T the letter of a rule of the
# examples, named in the instruction). The large held-out split (--heldout-large) and the
# calibration split (--calibration) are the committed files byte for byte, share no prefix with each
# other or the held-out suite, have only held-out questions and solvable answers, 4 requests per
# prefix, >= 600 requests in each ratio band (split at the median group ratio, as `bench
# --ratio-band`), and a long-prefix family (r >= 0.85) of about a third of the groups.
# Usage: suite_generator.sh <bicache binary> <source dir>
set -euo pipefail
SRC="$2"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

/usr/bin/python3 "$SRC/tools/train/suite.py" --heldout "$TMP/plain.jsonl" >/dev/null
/usr/bin/python3 "$SRC/tools/train/suite.py" --heldout "$TMP/worked.jsonl" --rule-worked >/dev/null
/usr/bin/python3 "$SRC/tools/train/suite.py" --heldout-large "$TMP/large.jsonl" \
  --calibration "$TMP/calibration.jsonl" >/dev/null
for split in heldout_large calibration; do
  file="$TMP/${split#heldout_}.jsonl"
  cmp "$SRC/tests/data/suite/$split.jsonl" "$file" ||
    { echo "tests/data/suite/$split.jsonl is not what suite.py writes" >&2; exit 1; }
done
echo "ok   the committed large held-out and calibration splits are suite.py's output, byte for byte"

/usr/bin/python3 - "$SRC" "$TMP" <<'EOF'
import json
import re
import sys

src, tmp = sys.argv[1], sys.argv[2]
sys.path.insert(0, src + "/tools/train")
import bpe
import format as fmt
import suite

committed = src + "/tests/data/suite/heldout.jsonl"
assert open(committed).read() == open(tmp + "/plain.jsonl").read(), \
    "tests/data/suite/heldout.jsonl is not what suite.py --heldout writes"
print("ok   the committed held-out suite is suite.py's output, byte for byte")
held = suite.load_jsonl(committed)
worked = suite.load_jsonl(tmp + "/worked.jsonl")
fams = sorted(set(s["family"] for s in held))
assert fams == ["arith", "docqa", "rule"], fams
assert all(sum(s["family"] == f for s in held) == 100 for f in fams)


def docqa_answer(prefix, prompt):
    ent = [n for n in suite.NAMES if re.search(r"\b%s\b" % n, prompt)]
    att = [a for a in suite.ATTR_NAMES if re.search(r"\b%s\b" % a, prompt)]
    assert len(ent) == 1 and len(att) == 1, (prompt, ent, att)
    found = set()
    for sent in re.split(r"(?<=\.)\s+", prefix):
        if re.search(r"\b%s\b" % ent[0], sent):
            found |= {v for v in suite.ATTRS[att[0]] if re.search(r"\b%s\b" % v, sent)}
    assert len(found) == 1, (prompt, found)  # exactly one sentence states the asked fact
    return found.pop()


def letters(text):
    return text.split()


def rules_of(prefix):
    assert len(suite.rule_examples(prefix)) >= 3, prefix
    return suite.rules_shown(prefix)


def rule_answers(prefix, prompt):
    q = re.fullmatch(r"input: ([a-z ]+) -> output:", prompt)
    assert q, prompt
    return {n: " ".join(suite.RULES[n](letters(q.group(1)))) for n in rules_of(prefix)}


def arith_answer(prefix, prompt):
    box = re.search(r"one box holds (\d+) items", prefix)
    assert box and "box holds" not in prompt, prompt  # the box size is only in the prefix
    val = int(re.match(r"\w+ has (\d+) boxes", prompt).group(1)) * int(box.group(1))
    for sent in re.split(r"(?<=\.)\s+", prompt)[1:]:
        n = re.search(r"(\d+)", sent)
        if re.search(r"buys \d+ more|gives \w+ \d+ more", sent):
            val += int(n.group(1))
        elif re.search(r"gives away|loses", sent):
            val -= int(n.group(1))
        elif "doubles" in sent or "triples" in sent or "four times" in sent:
            val *= 2 if "doubles" in sent else 3 if "triples" in sent else 4
        else:
            assert sent.startswith("How many"), sent
    return val


# Each family's solver and the reference answer in its terms (rule: the set of answers the rules
# the examples allow give, which must be the reference alone).
SOLVE = {"docqa": docqa_answer, "rule": lambda p, q: set(rule_answers(p, q).values()), "arith": arith_answer}


def want(s):
    a = s["answer"]
    if s["family"] == "arith":
        return int(a.rsplit("####", 1)[1])
    return {a} if s["family"] == "rule" else a


for s in held:
    assert SOLVE[s["family"]](s["prefix"], s["prompt"]) == want(s), s["id"]
print("ok   all 300 held-out answers follow from prefix + prompt (docqa fact, rule examples, arith box)")

# The answer needs the prefix: with the prefix of another group of the same family, the solver's
# answer differs for most samples (docqa: the entity is not in most other documents).
for fam in ("docqa", "rule", "arith"):
    group = [s for s in held if s["family"] == fam]
    prefixes = sorted(set(s["prefix"] for s in group))
    diff = 0
    for s in group:
        alt = prefixes[(prefixes.index(s["prefix"]) + 1) % len(prefixes)]
        try:
            got = SOLVE[fam](alt, s["prompt"])
        except AssertionError:
            got = None
        diff += got != want(s)
    assert diff >= 50, (fam, diff)
    print("ok   %s: %d of 100 answers change with another group's prefix" % (fam, diff))

assert suite.test_disjoint(held)
hp = set(s["prefix"] for s in held) | set(s["prefix"] for s in worked)
hq = set(s["prompt"] for s in held)
ts = suite.TrainStream(11, hp)
for i in range(600):
    fam = ["rule-worked", "rule-named", "arith-drill"][i % 3]
    p, qs = ts.group(fam, 4)
    assert p not in hp and not any(q in hq or suite.is_heldout_question(q) for q, _ in qs)
print("ok   training groups (all families, worked / named rules, drills) share no prefix or question with the held-out suite")

tok = bpe.Tokenizer.load(src + "/tools/train/tokenizer.json")
ratios = []
for s in held:
    n_pre = len(tok.encode(fmt.prefix_text(s["prefix"])))
    n_req = len(tok.encode(fmt.turn_text(s["prompt"])))
    ratios.append(n_pre / (n_pre + n_req + fmt.GEN_LENGTH))
assert min(ratios) <= 0.3 and max(ratios) >= 0.95, (min(ratios), max(ratios))
print("ok   prefix ratios span %.2f..%.2f" % (min(ratios), max(ratios)))

assert len(worked) == len(held)
for s, w in zip(held, worked):
    if s["family"] != "rule":
        assert s == w, s["id"]
        continue
    assert (w["id"], w["prompt"]) == (s["id"], s["prompt"])
    m = re.fullmatch(r"rule ([A-Z])\. #### ([a-z ]+)", w["answer"])
    assert m and m.group(2) == s["answer"], w["answer"]
    label = suite.RULE_OF_LABEL[m.group(1)]
    assert label in rules_of(w["prefix"]), w["id"]  # the rule named is one the examples show
    assert "%s %s" % (m.group(1), label) in w["prefix"], w["id"]  # and the instruction says so
    ex = lambda prefix: [l for l in prefix.split("\n") if l.startswith("input:")]
    assert w["prefix"] != s["prefix"] and ex(w["prefix"]) == ex(s["prefix"])
    assert fmt.score("rule", "rule P. #### " + s["answer"], w["answer"])
    assert not fmt.score("rule", s["answer"], w["answer"])
print("ok   --rule-worked: only rule samples change (instruction, 'rule T. #### OUTPUT' answers)")

# The large splits.
large = suite.load_jsonl(src + "/tests/data/suite/heldout_large.jsonl")
calib = suite.load_jsonl(src + "/tests/data/suite/calibration.jsonl")
splits = {"heldout": held, "heldout_large": large, "calibration": calib}
prefixes = {k: set(s["prefix"] for s in v) for k, v in splits.items()}
for a, b in (("heldout", "heldout_large"), ("heldout", "calibration"), ("heldout_large", "calibration")):
    assert not prefixes[a] & prefixes[b], (a, b, len(prefixes[a] & prefixes[b]))
    assert not set(s["id"] for s in splits[a]) & set(s["id"] for s in splits[b]), (a, b)
print("ok   heldout, heldout_large and calibration share no prefix and no id")

for name, split, n in (("heldout_large", large, 2160), ("calibration", calib, 720)):
    assert len(split) == n, (name, len(split))
    assert all(suite.is_heldout_question(s["prompt"]) for s in split), name
    for s in split:
        assert SOLVE[s["family"]](s["prefix"], s["prompt"]) == want(s), s["id"]
    groups = {}
    for s in split:
        groups.setdefault(s["prefix_id"], []).append(s)
    assert all(len(g) == 4 and len(set(x["prefix"] for x in g)) == 1 for g in groups.values()), name
    assert len(set(x[0]["prefix"] for x in groups.values())) == len(groups), name
    for fam in suite.FAMILIES:
        assert sum(s["family"] == fam for s in split) == n // 3, (name, fam)
    ratio, longest = {}, 0
    for pid, g in groups.items():
        rs = []
        for s in g:
            n_pre = len(tok.encode(fmt.prefix_text(s["prefix"])))
            tokens = n_pre + len(tok.encode(fmt.turn_text(s["prompt"]))) + fmt.GEN_LENGTH
            rs.append(n_pre / tokens)
            longest = max(longest, tokens)
        ratio[pid] = sum(rs) / len(rs)
        if "-long-" in pid:
            assert min(rs) >= suite.LONG_RATIO, (pid, min(rs))
    assert longest <= suite.MAX_TOKENS, (name, longest)
    med = sorted(ratio.values())[len(ratio) // 2]
    short = 4 * sum(r < med for r in ratio.values())
    long_ = 4 * sum(r >= med for r in ratio.values())
    n_long = sum("-long-" in pid for pid in ratio)
    assert min(short, long_) >= n * 0.45 and (name != "heldout_large" or min(short, long_) >= 600), (name, short, long_)
    assert 0.25 <= n_long / len(ratio) <= 0.45, (name, n_long)
    for fam in suite.FAMILIES:
        assert any(pid.startswith(pid.split("-")[0] + "-" + fam + "-long-") for pid in ratio), (name, fam)
    print("ok   %s: %d requests, %d groups of 4, bands short %d / long %d (median group ratio %.2f), "
          "%d long-prefix groups (r >= %.2f) in every family, ratios %.2f..%.2f, <= %d tokens"
          % (name, n, len(ratio), short, long_, med, n_long, suite.LONG_RATIO, min(ratio.values()),
             max(ratio.values()), longest))

# The realistic-spread split (--heldout-spread; regenerating it takes minutes, so its properties are
# checked instead of its bytes): disjoint from the others, solvable, groups of 4, 240 requests in
# each 5-point ratio bin of 0.50-0.95, every request inside its group's bin.
spread = suite.load_jsonl(src + "/tests/data/suite/heldout_spread.jsonl")
assert len(spread) == 2160, len(spread)
sp = set(s["prefix"] for s in spread)
for k, v in prefixes.items():
    assert not sp & v, ("heldout_spread", k, len(sp & v))
assert all(suite.is_heldout_question(s["prompt"]) for s in spread)
per_bin = {}
longest = 0
for s in spread:
    assert SOLVE[s["family"]](s["prefix"], s["prompt"]) == want(s), s["id"]
    lo = int(s["prefix_id"].split("-")[2][1:]) / 100
    n_pre = len(tok.encode(fmt.prefix_text(s["prefix"])))
    tokens = n_pre + len(tok.encode(fmt.turn_text(s["prompt"]))) + fmt.GEN_LENGTH
    assert lo <= n_pre / tokens < lo + 0.05, (s["id"], n_pre / tokens)
    longest = max(longest, tokens)
    per_bin[lo] = per_bin.get(lo, 0) + 1
assert longest <= suite.MAX_TOKENS, longest
assert sorted(per_bin) == [round(0.50 + 0.05 * i, 2) for i in range(9)], sorted(per_bin)
assert set(per_bin.values()) == {240}, per_bin
print("ok   heldout_spread: 2160 requests, 240 in each ratio bin of 0.50-0.95, disjoint, solvable")
EOF

# `--suite NAME` selects a committed split: eval reads the calibration split and reports its path.
OMP_NUM_THREADS=1 "$1" eval --suite calibration --limit 1 --gen-length 4 --json "$TMP/eval.json" >/dev/null
/usr/bin/python3 - "$SRC" "$TMP/eval.json" <<'EOF2'
import json
import sys

report = json.load(open(sys.argv[2]))
assert report["settings"]["suite"] == sys.argv[1] + "/tests/data/suite/calibration.jsonl", report["settings"]
assert report["n"] == 3 and [r["id"] for r in report["results"]][0].startswith("cal-"), report["results"]
print("ok   eval --suite calibration reads tests/data/suite/calibration.jsonl")
EOF2
