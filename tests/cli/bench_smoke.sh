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
# The project's targets, with what was measured against them.
t = {x["mode"]: x for x in j["targets"]}
assert set(t) == {"bicache", "bicache+dual"}, t
assert t["bicache"]["versus"] == "none" and t["bicache+dual"]["versus"] == "dual"
for x in t.values():
    want = j["modes"][x["mode"]]["tokens_per_s"] / j["modes"][x["versus"]]["tokens_per_s"]
    assert abs(x["speedup"] - want) < 1e-9, x
    assert x["speedup_met"] == (x["speedup"] >= x["speedup_target"]), x
    assert abs(x["speedup_shortfall"] - max(0.0, x["speedup_target"] - x["speedup"])) < 1e-9, x
    acc = 100 * (j["modes"][x["mode"]]["accuracy"] - j["modes"]["none"]["accuracy"])
    assert abs(x["accuracy_points_vs_none"] - acc) < 1e-9, x
print("bench json ok")
PY

grep -q "^target: bicache " "$TMP/stdout.txt" || { echo "no target line in the table"; exit 1; }
grep -q "where the time goes" "$TMP/stdout.txt" || { echo "no per-phase breakdown in the table"; exit 1; }
head -c 5 "$TMP/out.svg" | grep -Eq '^(<svg|<\?xml)' || { echo "SVG does not start with <svg"; exit 1; }
grep -q '</svg>' "$TMP/out.svg"
echo "bench smoke ok"
