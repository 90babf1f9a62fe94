#!/usr/bin/env bash
# tools/train/make_model.sh's own logic, with a stub in place of Python (nothing is trained): bad
# arguments are refused before any work; the committed tokenizer is checked, not learnt again; a
# rerun after a failed phase skips the phases that finished and resumes at the failed one; without
# a checkpoint the phase markers are cleared and training starts from phase 1.
set -euo pipefail
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
check() {  # check <label> <cond...>
  local label=$1; shift
  if "$@"; then echo "ok   $label"; else echo "FAIL $label"; fail=1; fi
}

mkdir -p "$TMP/tools/train"
cp "$SRC/tools/train/make_model.sh" "$TMP/tools/train/"
touch "$TMP/tools/train/tokenizer.json"
# The stub logs each call; train.py leaves a checkpoint and fails when FAIL_AT is in its arguments.
cat >"$TMP/py" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"$STUB_LOG"
if [[ $1 == tools/train/train.py ]]; then
  [[ -n ${FAIL_AT:-} && " $* " == *" $FAIL_AT "* ]] && exit 1
  mkdir -p tools/train/ckpt && touch tools/train/ckpt/latest.pt
fi
exit 0
EOF
chmod +x "$TMP/py"
export PYTHON=$TMP/py STUB_LOG=$TMP/calls
MM=$TMP/tools/train/make_model.sh
trains() { grep -c '^tools/train/train.py' "$STUB_LOG" || true; }

# ---- arguments refused before any work ----------------------------------------------------------
for args in "abc" "2" "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16" "151 85 x"; do
  : >"$STUB_LOG"
  rc=0
  # shellcheck disable=SC2086
  bash "$MM" $args >"$TMP/out" 2>&1 || rc=$?
  check "'$args' refused (exit 2, no work)" [ "$rc:$(wc -c <"$STUB_LOG")" = 2:0 ]
done
: >"$STUB_LOG"
rc=0
TRAIN_DEVICE=gpu bash "$MM" >"$TMP/out" 2>&1 || rc=$?
check "TRAIN_DEVICE=gpu refused up front" [ "$rc:$(wc -c <"$STUB_LOG"):$(grep -c TRAIN_DEVICE "$TMP/out")" = 2:0:1 ]
bash "$MM" --help >"$TMP/out" 2>&1
check "--help prints the usage" grep -q 'MINUTES' "$TMP/out"

# ---- a fresh run, a failed phase, a rerun -------------------------------------------------------
: >"$STUB_LOG"
rc=0
FAIL_AT=600 bash "$MM" >"$TMP/out" 2>&1 || rc=$?  # phase 13 is `--steps 600`
check "a failed phase stops the run" [ "$rc:$(trains)" = 1:13 ]
check "the tokenizer is checked, not learnt" grep -q '^tools/train/bpe.py --check tools/train/tokenizer.json$' "$STUB_LOG"
check "phases 1-12 marked finished, 13 not" [ "$(cd "$TMP/tools/train/ckpt" && ls phase-*.done | sort -V | tr '\n' ' ')" = "$(printf 'phase-%d.done ' $(seq 1 12))" ]
: >"$STUB_LOG"
bash "$MM" >"$TMP/out" 2>&1
check "the rerun trains phases 13-17 only" [ "$(trains):$(grep -m1 '^tools/train/train.py' "$STUB_LOG" | grep -c -- '--steps 600')" = 5:1 ]
check "the rerun exports" grep -q '^tools/train/export.py' "$STUB_LOG"
: >"$STUB_LOG"
bash "$MM" >"$TMP/out" 2>&1
check "a finished run trains nothing more" [ "$(trains)" = 0 ]
rm "$TMP/tools/train/ckpt/latest.pt"
: >"$STUB_LOG"
bash "$MM" >"$TMP/out" 2>&1
check "no checkpoint: from phase 1 again (all 17)" [ "$(trains):$(grep -c -- '--fresh' "$STUB_LOG")" = 17:1 ]
: >"$STUB_LOG"
NEW_TOKENIZER=1 bash "$MM" >"$TMP/out" 2>&1
check "NEW_TOKENIZER=1 learns the tokenizer" grep -q '^tools/train/bpe.py --out tools/train/tokenizer.json$' "$STUB_LOG"

# ---- bpe.py --check: the committed tokenizer covers the suite; a small one does not ---------------
if /usr/bin/python3 "$SRC/tools/train/bpe.py" --check "$SRC/tools/train/tokenizer.json" >"$TMP/out" 2>&1; then
  echo "ok   bpe.py --check: the committed tokenizer covers the suite"
else
  echo "FAIL bpe.py --check on the committed tokenizer:"; cat "$TMP/out"; fail=1
fi
/usr/bin/python3 - "$SRC/tools/train/tokenizer.json" "$TMP/small.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["merges"] = d["merges"][:200]  # the names and values need later merges
json.dump(d, open(sys.argv[2], "w"))
PY
rc=0
/usr/bin/python3 "$SRC/tools/train/bpe.py" --check "$TMP/small.json" >"$TMP/out" 2>&1 || rc=$?
check "bpe.py --check: a tokenizer missing merges is refused" [ "$rc:$(grep -c 'does not cover the suite' "$TMP/out")" = 1:1 ]
exit $fail
