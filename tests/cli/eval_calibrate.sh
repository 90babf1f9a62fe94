#!/usr/bin/env bash
# `bicache eval` writes its JSON report (first 2 samples of each of the suite's 3 families), and
# `bicache calibrate` writes a depth table next to (a copy of) the model that `generate --cache
# bicache` then uses: the depth it reports is the table's depth for the request's ratio.
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
cp "$SRC/tests/data/golden/llada-tiny.gguf" "$TMP/model.gguf"

"$BIN" eval -t 1 -m "$TMP/model.gguf" --limit 2 --json "$TMP/eval.json" --cache bicache >"$TMP/eval.txt" 2>"$TMP/eval.err"
cat "$TMP/eval.txt"
python3 - "$TMP/eval.json" <<'PY' || fail=1
import json, sys
j = json.load(open(sys.argv[1]))
for k in ("n", "overall", "accuracy", "settings", "results"):
    assert k in j, "missing key " + k
assert j["n"] == 6, "n = %r, want 6" % j["n"]
assert sorted(j["accuracy"]) == ["arith", "docqa", "rule"], j["accuracy"]
assert len(j["results"]) == 6
for r in j["results"]:
    for k in ("id", "family", "answer", "expected", "correct", "depth", "prefix_tokens", "steps"):
        assert k in r, "result missing " + k
assert [r["family"] for r in j["results"]] == ["docqa"] * 2 + ["rule"] * 2 + ["arith"] * 2
assert 0 <= j["overall"] <= 1
assert j["settings"]["cache"] == "bicache" and j["settings"]["gen_length"] == 32
# Wilson 95% intervals: around the accuracy, inside [0, 1], wide for 2 samples per family.
lo, hi = j["overall_ci95"]
assert 0 <= lo <= j["overall"] <= hi <= 1 and hi - lo > 0.3, j["overall_ci95"]
assert sorted(j["accuracy_ci95"]) == sorted(j["accuracy"]), j["accuracy_ci95"]
for f, (lo, hi) in j["accuracy_ci95"].items():
    assert 0 <= lo <= j["accuracy"][f] <= hi <= 1 and hi - lo > 0.5, (f, lo, hi)
print("ok   eval JSON has the required keys, n == 6, 2 per family in file order, 95% intervals")
PY
for word in docqa rule arith overall "95% interval" "cache hit rate" "mean depth" "tokens/s"; do
  grep -q "$word" "$TMP/eval.txt" || { echo "FAIL eval table lacks '$word'"; fail=1; }
done
# Same seed, same answers.
"$BIN" eval -t 1 -m "$TMP/model.gguf" --limit 2 --json "$TMP/eval2.json" --cache bicache >/dev/null 2>&1
python3 - "$TMP/eval.json" "$TMP/eval2.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert [r["answer"] for r in a["results"]] == [r["answer"] for r in b["results"]], "eval is not deterministic"
print("ok   eval twice gives the same answers")
PY
# --batch runs samples together: same answers, same order, same report.
"$BIN" eval -t 1 -m "$TMP/model.gguf" --limit 2 --batch 4 --json "$TMP/eval_b4.json" --cache bicache >/dev/null 2>&1
python3 - "$TMP/eval.json" "$TMP/eval_b4.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert [(r["id"], r["answer"], r["correct"]) for r in a["results"]] == [(r["id"], r["answer"], r["correct"]) for r in b["results"]], "--batch changed the answers"
assert b["settings"]["batch"] == 4 and b["n"] == a["n"]
print("ok   eval --batch 4 gives the answers of --batch 1")
PY
"$BIN" eval -t 1 -m "$TMP/model.gguf" --limit 1 --families rule,arith --json - >"$TMP/fam.json" 2>/dev/null
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['n']==2 and sorted(j['accuracy'])==['arith','rule'], j; print('ok   --families rule,arith --limit 1 -> 2 samples')" "$TMP/fam.json" || fail=1
rc=0
"$BIN" eval -t 1 -m "$TMP/model.gguf" --families nosuch >/dev/null 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q -- '--families' "$TMP/err"; then echo "ok   unknown family refused"; else echo "FAIL unknown family: exit $rc"; cat "$TMP/err"; fail=1; fi
# A canvas no sample fits beside is an error naming --gen-length, not a run that scores 0.
rc=0
"$BIN" eval -t 1 -m "$TMP/model.gguf" --limit 1 --gen-length 5000 >/dev/null 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q -- 'none of the 3 samples fits.*--gen-length 5000' "$TMP/err"; then echo "ok   eval: no sample fits -> error"; else echo "FAIL eval no sample fits: exit $rc"; cat "$TMP/err"; fail=1; fi
rc=0
"$BIN" bench -t 1 -m "$TMP/model.gguf" --gen-length 5000 --modes none >/dev/null 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q -- 'none of the suite.*--gen-length' "$TMP/err"; then echo "ok   bench: no sample fits -> error naming --gen-length"; else echo "FAIL bench no sample fits: exit $rc"; cat "$TMP/err"; fail=1; fi

"$BIN" calibrate -t 1 -m "$TMP/model.gguf" --limit 4 --out "$TMP/T.json" >"$TMP/cal.txt" 2>"$TMP/cal.err"
cat "$TMP/cal.txt"
grep -q 'ratio%' "$TMP/cal.txt" && grep -q 'depth table' "$TMP/cal.txt" && grep -qE '^ *[0-9]+-[0-9]+ +[0-9]+ +[01]\.[0-9]{3} ' "$TMP/cal.txt" \
  && echo "ok   calibrate prints the curves and the step function" || { echo "FAIL calibrate output"; fail=1; }
python3 - "$TMP/T.json" <<'PY' || fail=1
import json, sys
t = json.load(open(sys.argv[1]))
assert t["format"] == "bicache-depth-table/1" and t["n_layer"] == 2 and t["bins"], t
assert all(len(b["similarity"]) == 2 for b in t["bins"])
print("ok   calibrate wrote a table with %d bins, points %s" % (len(t["bins"]), t["points"]))
PY

# Without --out the table goes next to the model, where generate picks it up; same input, same table.
"$BIN" calibrate -t 1 -m "$TMP/model.gguf" --limit 4 >/dev/null 2>&1
if cmp -s "$TMP/T.json" "$TMP/model.gguf.depth.json"; then echo "ok   default --out is MODEL.gguf.depth.json, same table"; else echo "FAIL default calibrate output differs or is missing"; fail=1; fi
sys_prompt=$(python3 -c "print('Answer every question briefly and exactly, with no extra words. ' * 4)")
"$BIN" generate -t 1 -m "$TMP/model.gguf" --system "$sys_prompt" --chat "Hi?" --cache bicache --json >"$TMP/gen.json"
python3 - "$TMP/T.json" "$TMP/gen.json" <<'PY' || fail=1
import json, sys
t, g = (json.load(open(p)) for p in sys.argv[1:])
c = g["cache"]
assert "depth" in c, g
want = 0
for p in t["points"]:
    if p["ratio_pct"] <= c["ratio"] * 100 + 1e-9:
        want = p["depth"]
assert c["depth"] == want, "depth %r, the table says %r at ratio %.3f" % (c["depth"], want, c["ratio"])
print("ok   generate --cache bicache used the table: ratio %.3f -> depth %d" % (c["ratio"], c["depth"]))
PY
# The original golden file has no table next to it: bicache falls back to depth 0.
"$BIN" generate -t 1 -m "$SRC/tests/data/golden/llada-tiny.gguf" --system "$sys_prompt" --chat "Hi?" --cache bicache --json >"$TMP/gen0.json"
d=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['cache']['depth'])" "$TMP/gen0.json")
[[ -f $SRC/tests/data/golden/llada-tiny.gguf.depth.json || $d == 0 ]] && echo "ok   without a table: depth $d" || { echo "FAIL depth $d without a table"; fail=1; }

# Criterion "answers": depths 0, 1, ... are served up to each bin's first unsafe one, the per-bin
# agreement curve is saved in the table, each bin's depth is the deepest one whose answers agree
# with none's (and are right as often), and the SVG draws the curves.
"$BIN" calibrate -t 1 -m "$TMP/model.gguf" --criterion answers --limit 3 --gen-length 8 \
  --min-bin-samples 1 --min-agreement 0.3 --out "$TMP/A.json" --svg "$TMP/A.svg" >"$TMP/calA.txt" 2>"$TMP/calA.err"
cat "$TMP/calA.txt"
grep -q 'agreement with none by reuse depth' "$TMP/calA.txt" && grep -q 'criterion answers' "$TMP/calA.txt" \
  && echo "ok   calibrate --criterion answers prints the agreement curves" || { echo "FAIL calibrate answers output"; cat "$TMP/calA.err"; fail=1; }
grep -q 'answers agreeing with none' "$TMP/A.svg" && echo "ok   calibrate --svg draws the agreement curves" || { echo "FAIL calibrate --svg"; fail=1; }
python3 - "$TMP/A.json" <<'PY' || fail=1
import json, sys
t = json.load(open(sys.argv[1]))
assert t["criterion"] == "answers" and t["threshold"] == 0.3 and t["bins"], t
# What the answers were generated with, the committed split named inside the source tree.
c = t["calibrated_with"]
assert c["gen_length"] == 8 and c["steps"] == 8 and c["block_length"] == 8 and c["refresh"] == 8, c
assert c["samples"] == sum(b["samples"] for b in t["bins"]) and not c["suite"].startswith("/"), c
print("ok   the answers table records what it was measured with: %s" % c)
env = []
for b in t["bins"]:
    assert len(b["agreement"]) == len(b["accuracy"]) and b["agreement"][0] == 1.0, b
    d = 0
    while d < len(b["agreement"]) - 1 and b["agreement"][d + 1] >= t["threshold"] and b["accuracy"][d + 1] >= b["accuracy"][0] - 1e-12:
        d += 1
    # A bin's curve runs up to its first unsafe depth (measured, then stopped), or to n_layer.
    assert len(b["agreement"]) == min(d + 2, 3), ("curve stops at the first unsafe depth", b)
    env.append((b["ratio_pct"], d))
# The table is the envelope: depth at ratio r = min over bins with ratio >= r.
want = []
for i, (r, _) in enumerate(env):
    d = min(x for _, x in env[i:])
    if d > (want[-1]["depth"] if want else 0):
        want.append({"ratio_pct": r, "depth": d})
assert t["points"] == want and want, (t["points"], want)  # this input reaches depth > 0 somewhere
print("ok   answers table: %d bins, points %s follow the recorded agreement" % (len(env), t["points"]))
PY
# Served with another generation than it was measured with (block 4 of 8, not one block), the
# answers table earns a warning naming both; with the same settings, none.
cp "$TMP/model.gguf" "$TMP/m2.gguf" && cp "$TMP/A.json" "$TMP/m2.gguf.depth.json"
"$BIN" generate -t 1 -m "$TMP/m2.gguf" --system "$sys_prompt" --chat "Hi?" --cache bicache --gen-length 8 \
  --block-length 4 >/dev/null 2>"$TMP/warn.txt"
grep -q "warning: the depth table's answers were measured with block 8 (here: block 4)" "$TMP/warn.txt" \
  && echo "ok   generate warns of a table measured at another block length" || { echo "FAIL no block-length warning"; cat "$TMP/warn.txt"; fail=1; }
"$BIN" generate -t 1 -m "$TMP/m2.gguf" --system "$sys_prompt" --chat "Hi?" --cache bicache --gen-length 8 \
  >/dev/null 2>"$TMP/warn.txt"
grep -q "measured with" "$TMP/warn.txt" && { echo "FAIL warning with the table's own settings"; cat "$TMP/warn.txt"; fail=1; } \
  || echo "ok   no warning with the settings the table was measured with"
rc=0
"$BIN" calibrate -t 1 -m "$TMP/model.gguf" --criterion answer --limit 1 >/dev/null 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q -- "--criterion: unknown depth criterion 'answer'" "$TMP/err"; then echo "ok   unknown --criterion refused"; else echo "FAIL unknown criterion: exit $rc"; cat "$TMP/err"; fail=1; fi
rc=0
"$BIN" calibrate -t 1 -m "$TMP/model.gguf" --criterion answers --min-agreement 0 --limit 1 >/dev/null 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q -- "--min-agreement must be in (0, 1]" "$TMP/err"; then echo "ok   --min-agreement 0 refused"; else echo "FAIL min-agreement 0: exit $rc"; cat "$TMP/err"; fail=1; fi
rc=0
"$BIN" calibrate -t 1 -m "$TMP/model.gguf" --criterion accuracy --max-drop 0 --limit 1 >/dev/null 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q -- "--max-drop must be in (0, 100] points" "$TMP/err"; then echo "ok   --max-drop 0 refused"; else echo "FAIL max-drop 0: exit $rc"; cat "$TMP/err"; fail=1; fi

# --criterion accuracy (the fast profile): written by default beside the model as
# MODEL.gguf.depth.fast.json, with each bin's accuracy_low (the paired interval's lower end, 0 at
# depth 0, one per depth run, never above the change itself), and bins' depths by that criterion.
"$BIN" calibrate -t 1 -m "$TMP/model.gguf" --criterion accuracy --max-drop 50 --limit 3 --gen-length 8 \
  --min-bin-samples 1 >"$TMP/calF.txt" 2>"$TMP/calF.err" || { echo "FAIL calibrate accuracy"; cat "$TMP/calF.err"; fail=1; }
grep -q 'criterion accuracy, max drop (points) 50' "$TMP/calF.txt" \
  && echo "ok   calibrate --criterion accuracy prints its criterion" || { echo "FAIL accuracy output"; cat "$TMP/calF.txt"; fail=1; }
python3 - "$TMP/model.gguf.depth.fast.json" <<'PY' || fail=1
import json, sys
t = json.load(open(sys.argv[1]))
assert t["criterion"] == "accuracy" and t["threshold"] == 50 and t["bins"], t
for b in t["bins"]:
    low, acc = b["accuracy_low"], b["accuracy"]
    assert len(low) == len(acc) >= 1 and low[0] == 0, b
    assert all(l <= a - acc[0] + 1e-12 and l >= -1 for l, a in zip(low[1:], acc[1:])), b
assert t["d_model"] > 0 and t["n_vocab"] > 0, t
print("ok   the accuracy table is MODEL.gguf.depth.fast.json, with accuracy_low per depth")
PY
rc=0
"$BIN" generate -m "$TMP/model.gguf" -p hi --gen-length 4 --cache bicache --depth-profile fast >/dev/null 2>"$TMP/err" || rc=$?
[[ $rc -eq 0 ]] && echo "ok   --depth-profile fast reads the table calibrate wrote" || { echo "FAIL generate --depth-profile fast: exit $rc"; cat "$TMP/err"; fail=1; }

for crit in kv_similarity answers; do
  rc=0
  "$BIN" calibrate -t 1 -m "$TMP/model.gguf" --criterion $crit --bin 60 --limit 1 >/dev/null 2>"$TMP/err" || rc=$?
  if [[ $rc -eq 2 ]] && grep -q -- "--bin must be in \[1, 50\] percent" "$TMP/err"; then echo "ok   --bin 60 refused ($crit)"; else echo "FAIL --bin 60 ($crit): exit $rc"; cat "$TMP/err"; fail=1; fi
done

exit $fail
