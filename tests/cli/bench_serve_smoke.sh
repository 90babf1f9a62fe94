#!/usr/bin/env bash
# Smoke test of `bicache bench-serve`: the in-process server under a tiny load (2 clients, 4
# requests per mode) on the random-weight golden model with a hand-made depth table next to a temp
# copy; checks the JSON schema, that no request failed, that the prefix cache was hit in the
# prefix-reusing modes, and that nothing was left running or pinned.
set -euo pipefail
BIN="$1"
SRC="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

cp "$SRC/tests/data/golden/llada-tiny.gguf" "$TMP/m.gguf"
# Depth table in DepthTable::Save's format (2 layers): depth 1 from r=0, depth 2 from r=10%.
python3 - "$TMP/m.gguf.depth.json" <<'PY'
import json, sys
json.dump({"format": "bicache-depth-table/1",
           "ratio_definition": "prefix tokens / (prefix + rest of prompt + mask canvas) tokens",
           "threshold": 0.97, "n_layer": 2,
           "points": [{"ratio_pct": 0, "depth": 1}, {"ratio_pct": 10, "depth": 2}],
           "bins": [{"ratio_pct": 0, "samples": 3, "similarity": [0.99, 0.90]},
                    {"ratio_pct": 10, "samples": 3, "similarity": [0.995, 0.98]}]}, open(sys.argv[1], "w"))
PY

"$BIN" bench-serve -m "$TMP/m.gguf" --clients 2 --requests 4 --rounds 2 --prefixes 2 --per-prefix 2 \
  --max-tokens 8 --duration 120 -t 2 --json "$TMP/out.json" >"$TMP/stdout.txt"
cat "$TMP/stdout.txt"

python3 - "$TMP/out.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
modes = r["modes"]
assert set(modes) == {"none", "bicache", "dual", "bicache+dual"}, sorted(modes)
for name, m in modes.items():
    for k in ("requests", "errors", "seconds", "tokens_per_s", "answer_tokens_per_s", "requests_per_s",
              "p50_ms", "p99_ms", "prefix_hit_rate", "request_hit_rate"):
        assert k in m, (name, k)
    assert m["requests"] == 4 and m["errors"] == 0, (name, m)
    assert m["tokens_per_s"] > 0 and m["requests_per_s"] > 0, (name, m)
    assert 0 < m["p50_ms"] <= m["p99_ms"], (name, m)
    assert 0 <= m["prefix_hit_rate"] <= 1, (name, m)
assert r["errors"] == 0
# 2 prefixes x 2 requests, interleaved: round 1 builds both entries, round 2 hits them.
for name in ("bicache", "bicache+dual"):
    assert modes[name]["request_hit_rate"] > 0 and modes[name]["prefix_hit_rate"] > 0, (name, modes[name])
assert modes["none"]["prefix_hit_rate"] == 0
assert set(r["speedup_vs_none"]) == set(modes) and abs(r["speedup_vs_none"]["none"] - 1) < 1e-9
assert r["settings"]["clients"] == 2 and r["settings"]["max_tokens"] == 8
after = r["server_after"]
assert after["running"] == 0 and after["waiting"] == 0 and after["pinned_bytes"] == 0 and after["failed"] == 0, after
print("bench-serve JSON ok")
PY
