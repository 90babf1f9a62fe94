#!/usr/bin/env bash
# Smoke test of `bicache bench`: a tiny run of every cache mode on the random-weight golden model
# with a hand-made depth table next to a temp copy; checks the JSON schema and the SVG.
# Usage: bench_smoke.sh <bicache binary> <source dir>
set -euo pipefail
BIN="$1"
SRC="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

cp "$SRC/tests/data/golden/llada-tiny.gguf" "$TMP/m.gguf"
# Depth table in DepthTable::Save's format (2 layers): depth 1 from r=0, depth 2 from r=10%.
python3 - "$TMP/m.gguf.depth.json" <<'PY'
import json, sys
bins = [{"ratio_pct": 0, "samples": 3, "similarity": [0.99, 0.90]},
        {"ratio_pct": 10, "samples": 3, "similarity": [0.995, 0.98]},
        {"ratio_pct": 40, "samples": 2, "similarity": [0.999, 0.99]}]
json.dump({"format": "bicache-depth-table/1",
           "ratio_definition": "prefix tokens / (prefix + rest of prompt + mask canvas) tokens",
           "threshold": 0.97, "n_layer": 2,
           "points": [{"ratio_pct": 0, "depth": 1}, {"ratio_pct": 10, "depth": 2}],
           "bins": bins}, open(sys.argv[1], "w"))
PY

"$BIN" bench -m "$TMP/m.gguf" --prefixes 2 --per-prefix 2 --gen-length 8 -t 2 \
  --json "$TMP/out.json" --svg "$TMP/out.svg" > "$TMP/stdout.txt"
cat "$TMP/stdout.txt"

python3 - "$TMP/out.json" <<'PY'
import json, math, sys
j = json.load(open(sys.argv[1]))
modes = ["none", "llm", "dual", "bicache", "bicache+dual"]
keys = ["tokens_per_s", "accuracy", "agreement", "accuracy_by_family", "forwards_per_request",
        "hit_rate", "cache_bytes", "mean_depth", "requests_per_s", "answer_tokens_per_s"]
for top in ["modes", "speedup_vs_none", "speedup_vs_dual", "settings", "depth_table", "efficiency"]:
    assert top in j, "missing top-level key " + top
def finite(x, where):
    if isinstance(x, bool):
        return
    if isinstance(x, (int, float)):
        assert math.isfinite(x), where + " is not finite"
    elif isinstance(x, dict):
        for k, v in x.items():
            finite(v, where + "." + k)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            finite(v, where + "[%d]" % i)
    elif x is None:
        raise AssertionError(where + " is null")
finite(j, "json")
n = j["settings"]["requests"]
assert n == 4, n
for m in modes:
    assert m in j["modes"], "missing mode " + m
    d = j["modes"][m]
    for k in keys:
        assert k in d, m + " lacks " + k
    assert d["requests"] == n, (m, d["requests"])
    assert d["tokens_per_s"] > 0 and d["seconds"] > 0, m
    assert d["forwards_per_request"] > 0, m
    assert 0 <= d["accuracy"] <= 1 and 0 <= d["agreement"] <= 1 and 0 <= d["hit_rate"] <= 1, m
    assert m in j["speedup_vs_none"] and m in j["speedup_vs_dual"], m
    # Per-phase breakdown: the phases add up to the mode's time and the forwards take some of it.
    ph = d["phases"]
    parts = [ph[k] for k in ("start_s_per_request", "forward_s_per_request", "sample_s_per_request",
                             "other_s_per_request")]
    assert all(p >= 0 for p in parts), (m, ph)
    assert ph["forward_s_per_request"] > 0 and ph["sample_s_per_request"] > 0, (m, ph)
    assert abs(sum(parts) - d["seconds"] / n) <= 1e-6 + 1e-3 * d["seconds"] / n, (m, ph, d["seconds"])
assert j["modes"]["none"]["agreement"] == 1.0
assert j["modes"]["none"]["hit_rate"] == 0 and j["modes"]["none"]["cache_bytes"] == 0
# 2 prefixes x 2 requests: the second request of each prefix hits in the prefix-caching modes.
for m in ["llm", "bicache", "bicache+dual"]:
    assert j["modes"][m]["hit_rate"] == 0.5, (m, j["modes"][m]["hit_rate"])
    assert j["modes"][m]["cache_bytes"] > 0, m
    assert j["modes"][m]["mean_depth"] >= 1, m
    # the prefix-alone builds of the two misses are charged to the prefix phase
    assert j["modes"][m]["phases"]["start_s_per_request"] > 0, m
assert j["depth_table"]["present"] and j["depth_table"]["max_depth"] == 2
assert j["settings"]["block_length"] == 2  # dual included, no --block-length: gen/4
assert j["efficiency"]["gemm_gflops"] > 0
# Paired accuracy: every mode against none (bicache+dual also against dual), on the same requests.
for m in modes:
    d = j["modes"][m]
    assert d["correct"] == [x for x in d["correct"] if x in (0, 1)] and len(d["correct"]) == n, m
    assert abs(sum(d["correct"]) / n - d["accuracy"]) < 1e-9, m
    want = {"vs_none"} if m != "none" else set()
    if m == "bicache+dual":
        want.add("vs_dual")
    assert {k for k in d if k.startswith("vs_")} == want, (m, d.keys())
    for key in want:
        p = d[key]
        base = j["modes"][p["versus"]]
        assert "vs_" + p["versus"] == key and p["n"] == n, (m, p)
        assert abs(p["accuracy"] - d["accuracy"]) < 1e-9, (m, p)
        assert abs(p["accuracy_versus"] - base["accuracy"]) < 1e-9, (m, p)
        assert abs(p["delta_accuracy"] - (d["accuracy"] - base["accuracy"])) < 1e-9, (m, p)
        lo, hi = p["ci95"]
        assert -1 <= lo <= p["delta_accuracy"] <= hi <= 1 and hi - lo > 0.1, (m, p)  # 4 requests
        assert 0 <= p["mcnemar_p"] <= 1, (m, p)
        gain = sum(a and not b for a, b in zip(d["correct"], base["correct"]))
        loss = sum(b and not a for a, b in zip(d["correct"], base["correct"]))
        assert p["discordant"] == [gain, loss], (m, p)
        if key == "vs_none":
            assert p["agreement"] == d["agreement"], (m, p)
# The project's targets, with what was measured against them.
t = {x["mode"]: x for x in j["targets"]}
assert set(t) == {"bicache", "bicache+dual"}, t
assert t["bicache"]["versus"] == "none" and t["bicache+dual"]["versus"] == "dual"
for x in t.values():
    want = j["modes"][x["mode"]]["tokens_per_s"] / j["modes"][x["versus"]]["tokens_per_s"]
    assert abs(x["speedup"] - want) < 1e-9, x
    assert x["speedup_met"] == (x["speedup"] >= x["speedup_target"]), x
    assert abs(x["speedup_shortfall"] - max(0.0, x["speedup_target"] - x["speedup"])) < 1e-9, x
    # One accuracy check (no bands here), read from the paired object; 4 requests give an
    # interval far wider than 2 points, so "within 1 point" cannot be claimed.
    checks = x["accuracy_checks"]
    assert [c["scope"] for c in checks] == ["all"], checks
    p = j["modes"][x["mode"]]["vs_" + x["versus"]]
    assert checks[0]["delta_accuracy"] == p["delta_accuracy"] and checks[0]["ci95"] == p["ci95"]
    assert not checks[0]["met"] and not x["accuracy_met"], x
print("bench json ok")
PY

grep -q "^target: bicache " "$TMP/stdout.txt" || { echo "no target line in the table"; exit 1; }
grep -q "accuracy, paired on the same requests" "$TMP/stdout.txt" || { echo "no paired accuracy in the table"; exit 1; }
grep -q "^target: bicache .*NOT shown within 1 point of none" "$TMP/stdout.txt" || { echo "4 requests claimed 1 point"; exit 1; }
grep -q "where the time goes" "$TMP/stdout.txt" || { echo "no per-phase breakdown in the table"; exit 1; }

# --ratio-band sweep: the paired objects per band, and one accuracy check per scope.
"$BIN" bench -m "$TMP/m.gguf" --prefixes 2 --per-prefix 2 --gen-length 8 -t 2 --ratio-band sweep \
  --modes none,bicache --json "$TMP/sweep.json" > "$TMP/sweep.txt" 2>/dev/null
python3 - "$TMP/sweep.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
b = j["modes"]["bicache"]
assert b["vs_none"]["n"] == 8, b["vs_none"]
for band in ("short", "long"):
    p = b["by_band"][band]["vs_none"]
    assert p["n"] == 4 and p["versus"] == "none", (band, p)
    assert p["ci95"][0] <= p["delta_accuracy"] <= p["ci95"][1], (band, p)
    assert "vs_none" not in j["modes"]["none"]["by_band"][band]
(t,) = j["targets"]
assert [c["scope"] for c in t["accuracy_checks"]] == ["all", "short", "long"], t
assert t["accuracy_checks"][1]["ci95"] == b["by_band"]["short"]["vs_none"]["ci95"], t
print("bench sweep json ok")
PY
grep -Eq "^  bicache +none +long +4 " "$TMP/sweep.txt" || { echo "no per-band paired line"; exit 1; }
# scripts/merge_bench_bands.py: one band per run, merged, gives the sweep run's rows (same requests);
# on the sweep run alone it rebuilds bench's own overall row from the bands (or exits 1).
for band in short long; do
  "$BIN" bench -m "$TMP/m.gguf" --prefixes 2 --per-prefix 2 --gen-length 8 -t 2 --ratio-band $band \
    --modes none,bicache --json "$TMP/$band.json" > /dev/null 2>&1
done
python3 "$SRC/scripts/merge_bench_bands.py" "$TMP/sweep.json" --json "$TMP/merged-sweep.json" > /dev/null
python3 "$SRC/scripts/merge_bench_bands.py" "$TMP/short.json" "$TMP/long.json" \
  --json "$TMP/merged-bands.json" > "$TMP/merged.txt"
python3 - "$TMP" <<'PY'
import json, sys
a = json.load(open(sys.argv[1] + "/merged-sweep.json"))["bicache"]
b = json.load(open(sys.argv[1] + "/merged-bands.json"))["bicache"]
for scope in ("short", "long", "all"):
    for k in ("n", "accuracy", "accuracy_versus", "discordant", "agreement", "ci95"):
        assert a[scope][k] == b[scope][k], (scope, k, a[scope][k], b[scope][k])
assert b["all"]["n"] == 8 and b["short"]["n"] == 4, b
print("merge_bench_bands ok")
PY
grep -Eq "^bicache +all +8 " "$TMP/merged.txt" || { echo "no overall row from merge_bench_bands"; exit 1; }
grep -q "^target: bicache vs none all: accuracy" "$TMP/merged.txt" || { echo "no merged target line"; exit 1; }

# --depth-tables: one bicache mode per table, paired with none on the same requests, in the JSON,
# the text (one trade-off line per mode and band) and the SVG's trade-off panel.
python3 - "$TMP" <<'PY'
import json, sys
def table(path, criterion, threshold, points, bins, **extra):
    json.dump({"format": "bicache-depth-table/1", "criterion": criterion,
               "ratio_definition": "prefix tokens / (prefix + rest of prompt + mask canvas) tokens",
               "threshold": threshold, "n_layer": 2, "points": points, "bins": bins, **extra},
              open(path, "w"))
# Measured with one block of 8 and refresh 0; the bench below runs gen 8 in one block, refresh 8.
table(sys.argv[1] + "/answers.json", "answers", 0.98, [{"ratio_pct": 0, "depth": 2}],
      [{"ratio_pct": 0, "samples": 4, "agreement": [1, 1, 0.99], "accuracy": [0.5, 0.5, 0.5]}],
      calibrated_with={"suite": "cal.jsonl", "samples": 4, "gen_length": 8, "steps": 8,
                       "block_length": 8, "refresh": 0})
table(sys.argv[1] + "/kv.json", "kv_similarity", 0.998, [{"ratio_pct": 0, "depth": 1}],
      [{"ratio_pct": 0, "samples": 3, "similarity": [0.999, 0.99]}])
PY
"$BIN" bench -m "$TMP/m.gguf" --prefixes 1 --per-prefix 2 --gen-length 8 -t 2 --ratio-band sweep \
  --modes none,fixed:1 --depth-tables "$TMP/answers.json,$TMP/kv.json" \
  --json "$TMP/tables.json" --svg "$TMP/tables.svg" > "$TMP/tables.txt" 2>/dev/null
cat "$TMP/tables.txt"
python3 - "$TMP" <<'PY'
import json, sys
d = sys.argv[1]
j = json.load(open(d + "/tables.json"))
names = ["none", "fixed:1", "bicache[answers 0.98]", "bicache[kv 0.998]"]
assert set(j["modes"]) == set(names), list(j["modes"])
for name, path, crit, thr, depth in [("bicache[answers 0.98]", "answers.json", "answers", 0.98, 2),
                                     ("bicache[kv 0.998]", "kv.json", "kv_similarity", 0.998, 1)]:
    m = j["modes"][name]
    t = m["depth_table"]
    assert t["path"] == d + "/" + path and t["criterion"] == crit and t["threshold"] == thr, t
    assert t["max_depth"] == depth and m["mean_depth"] == depth, (t, m["mean_depth"])
    assert ("calibrated_with" in t) == (crit == "answers"), t
    assert m["vs_none"]["n"] == 4 and m["hit_rate"] == 0.5, m
    for band in ("short", "long"):
        assert m["by_band"][band]["vs_none"]["n"] == 2, (name, band)
        assert m["by_band"][band]["speedup_vs_none"] > 0, (name, band)
# Each served by its own table (2 layers, 1 layer at every ratio), not the model's (2 from 10%).
assert "depth_table" not in j["modes"]["fixed:1"] and "depth_table" not in j["modes"]["none"]
assert j["depth_table"]["path"] == d + "/m.gguf.depth.json"  # the model's own, unchanged
svg = open(d + "/tables.svg").read()
assert "id='tradeoff'" in svg and "target: -1 point" in svg, "no trade-off panel"
# one error bar per mode but none and scope (all, short, long)
assert svg.count("class='errbar'") == 3 * 3, svg.count("class='errbar'")
print("bench depth tables ok")
PY
grep -q "^trade-off vs none" "$TMP/tables.txt" || { echo "no trade-off section"; exit 1; }
grep -q "^    calibrated on 4 samples of cal.jsonl, gen 8, steps 8, block 8, refresh 0$" "$TMP/tables.txt" \
  || { echo "the answers table's calibration is not printed"; exit 1; }
grep -q "^    note: the depth table's answers were measured with refresh 0 (here: refresh 8)" "$TMP/tables.txt" \
  || { echo "no note on the refresh interval the table was measured with"; exit 1; }
for scope in all short long; do
  grep -Eq "^  bicache\[kv 0\.998\] +$scope +[0-9.]+x +[-+][0-9.]+ \[" "$TMP/tables.txt" ||
    { echo "no trade-off line for the kv table, $scope"; exit 1; }
done
# A table for another layer count is refused, naming the file.
python3 - "$TMP/bad.json" <<'PY'
import json, sys
json.dump({"format": "bicache-depth-table/1", "threshold": 0.9, "n_layer": 5,
           "points": [{"ratio_pct": 0, "depth": 1}], "bins": []}, open(sys.argv[1], "w"))
PY
if "$BIN" bench -m "$TMP/m.gguf" --prefixes 1 --per-prefix 2 --gen-length 8 -t 2 --modes none \
    --depth-tables "$TMP/bad.json" > /dev/null 2> "$TMP/bad.txt"; then
  echo "a 5-layer table was accepted for a 2-layer model"; exit 1
fi
grep -q "bad.json' is for another model: it was made for 5 layers" "$TMP/bad.txt" || { cat "$TMP/bad.txt"; exit 1; }
# The same file twice is refused; two files with the same criterion and threshold are told apart.
if "$BIN" bench -m "$TMP/m.gguf" --prefixes 1 --per-prefix 2 --gen-length 8 -t 2 --modes none \
    --depth-tables "$TMP/kv.json,$TMP/kv.json" > /dev/null 2> "$TMP/twice.txt"; then
  echo "the same table was accepted twice"; exit 1
fi
grep -q "kv.json' given twice" "$TMP/twice.txt" || { cat "$TMP/twice.txt"; exit 1; }
cp "$TMP/kv.json" "$TMP/kv2.json"
"$BIN" bench -m "$TMP/m.gguf" --prefixes 1 --per-prefix 2 --gen-length 8 -t 2 --modes none \
  --depth-tables "$TMP/kv.json,$TMP/kv2.json" --json "$TMP/two.json" > /dev/null 2>&1
python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))["modes"]; assert set(m) == {"none", "bicache[kv 0.998]", "bicache[kv 0.998 kv2.json]"}, list(m)' "$TMP/two.json"

head -c 5 "$TMP/out.svg" | grep -Eq '^(<svg|<\?xml)' || { echo "SVG does not start with <svg"; exit 1; }
grep -q '</svg>' "$TMP/out.svg"
echo "bench smoke ok"
