#!/usr/bin/env bash
# tools/train/train.py --rule-q / --arith-q: a rule or arith training row carries the requested
# number of questions (each answer masked: one answer start per question), and a malformed range is
# refused by name before any training starts. Usage: train_options.sh <bicache binary> <source dir>
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

for bad in "5,3" "0,2" "four" "1,2,3"; do
  if out=$("$PY" "$SRC/tools/train/train.py" --rule-q "$bad" --minutes 0 2>&1); then
    echo "FAIL --rule-q $bad accepted"; fail=1
  elif grep -q "argument --rule-q: expected" <<<"$out"; then
    echo "ok   --rule-q $bad refused: $(tail -1 <<<"$out")"
  else
    echo "FAIL --rule-q $bad: unexpected output: $out"; fail=1
  fi
done
exit $fail
