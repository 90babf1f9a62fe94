#!/usr/bin/env bash
# tools/train/probe_induction.py: its rows (every query's answer and <|eot|> the targets, nothing else),
# its scoring (a model that writes the right letters scores 100 of 100 held-out rule samples, one that
# writes them reversed scores only the palindromic ones), the rule it attributes to each held-out
# sample (one of the six, and the one whose letters the answer is), and a short run end to end.
# Usage: probe_induction.sh <bicache binary> <source dir>
set -euo pipefail
SRC="$2"
PY=/usr/bin/python3
export OMP_NUM_THREADS=1

"$PY" - "$SRC" <<'EOF'
import os
import random
import sys
sys.path.insert(0, sys.argv[1] + "/tools/train")
import torch
import bpe
import format as fmt
import probe_induction as pi
import suite

tok = bpe.Tokenizer.load(sys.argv[1] + "/tools/train/tokenizer.json")
held = [s for s in suite.load_jsonl(sys.argv[1] + "/tests/data/suite/heldout.jsonl") if s["family"] == "rule"]

# rule_of: every held-out sample gets the rule that maps its examples, and that rule maps its query
# to its answer.
for s in held:
    r = pi.rule_of(s)
    assert r in suite.RULES, (r, s["prefix"])
    q = s["prompt"][len("input: "):-len(" -> output:")].split()
    assert " ".join(suite.RULES[r](q)) == s["answer"], (r, s)
print("ok   rule_of names a rule for each of the %d held-out rule samples" % len(held))

# row: the targets are exactly each query's answer tokens and its <|eot|>.
rng = random.Random(3)
for _ in range(5):
    ids, ans = pi.row(tok, rng, 3, False)
    text = tok.decode([i for i, a in zip(ids, ans) if a])
    outs = [o.strip() for o in text.split("<|eot|>") if o.strip()]
    full = tok.decode(ids)
    assert len(outs) == 3 and all(("-> output:<|eot|><|assistant|>\n " + o + "<|eot|>") in full for o in outs), (outs, full)
print("ok   a probe row's targets are its answers and their <|eot|>")


class Oracle(torch.nn.Module):
    """Logits that put the gold (or the reversed gold) letter at every canvas position."""

    def __init__(self, reverse):
        super().__init__()
        self.gold = {}
        for s in held:
            p = tok.encode(fmt.prompt_text(s["prefix"], s["prompt"]))
            g = tok.encode(fmt.answer_text(s["answer"]), allow_special=False)
            self.gold[tuple(p)] = g[::-1] if reverse else g

    def forward(self, ids):
        row = ids[0].tolist()
        p = next(k for k in self.gold if tuple(row[:len(k)]) == k)
        out = torch.zeros(1, len(row), tok.n_vocab)
        for j, t in enumerate(self.gold[p]):
            out[0, len(p) + j, t] = 5.0
        return out


right, per = pi.evaluate(Oracle(False), tok, held)
assert right == len(held) and sum(n for _, n in per.values()) == len(held), (right, per)
wrong, _ = pi.evaluate(Oracle(True), tok, held)
palin = sum(s["answer"].split() == s["answer"].split()[::-1] for s in held)
assert wrong == palin, (wrong, palin)
print("ok   scoring: the right letters %d/%d, reversed ones %d (palindromes: %d)" % (right, len(held), wrong, palin))
EOF

# Bad flags are refused by name before anything loads (the same argparse types as train.py's).
for bad in "--q 3,1|expected 1 <= LO <= HI" "--q x|expected LO,HI" "--t-min 1.5|expected a share" \
           "--named -0.1|expected a share"; do
  flag=${bad%%|*}; want=${bad#*|}
  # shellcheck disable=SC2086
  if err=$(cd "$SRC/tools/train" && "$PY" probe_induction.py $flag --minutes 0 2>&1); then
    echo "FAIL probe_induction.py $flag was accepted"; exit 1
  fi
  grep -qF -- "$want" <<<"$err" || { echo "FAIL probe_induction.py $flag: $err"; exit 1; }
done
echo "ok   bad --q / --t-min / --named values are refused with the reason"

# End to end: a 2-layer model trained for a few seconds prints its start and final scores.
out=$(cd "$SRC/tools/train" && timeout 300 "$PY" probe_induction.py --layers 1 --d 32 --ff 64 --heads 2 \
  --minutes 0.05 --batch 4 --eval-every 100 --precision f32 2>&1)
grep -q "start acc 0\.[0-9][0-9] (" <<<"$out" && grep -q "final step [1-9][0-9]* loss [0-9.]* held-out rule 0\.[0-9][0-9] (" <<<"$out" \
  || { echo "FAIL end-to-end run: $out"; exit 1; }
echo "ok   a short probe run: $(tail -1 <<<"$out" | cut -c10-)"
