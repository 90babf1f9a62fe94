#!/usr/bin/env bash
# Smoke test of `bicache bench-serve`: the in-process server under a tiny load (2 clients, 4
# requests per mode) on the random-weight golden model with a hand-made depth table next to a temp
# copy; checks the JSON schema, that no request failed, that the prefix cache was hit in the
# prefix-reusing modes, and that nothing was left running or pinned; then an open-loop run (Poisson
# arrivals, --rate) and its settings, latencies and send delays.
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

# Open loop: Poisson arrivals at 40 req/s, at most 2 in flight.
"$BIN" bench-serve -m "$TMP/m.gguf" --clients 2 --requests 6 --rounds 1 --prefixes 2 --per-prefix 2 \
  --max-tokens 8 --modes none,bicache --rate 40 --seed 7 -t 2 --json "$TMP/open.json" >"$TMP/open.txt"
cat "$TMP/open.txt"
grep -q "Poisson arrivals at 40 req/s (seed 7), at most 2 in flight" "$TMP/open.txt"
python3 - "$TMP/open.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["settings"]
assert s["arrival"] == "poisson" and s["rate"] == 40 and s["seed"] == 7, s
assert r["errors"] == 0
for name, m in r["modes"].items():
    assert m["requests"] == 6 and m["errors"] == 0, (name, m)
    assert 0 < m["p50_ms"] <= m["p99_ms"] and m["mean_send_delay_ms"] >= 0, (name, m)
    # 6 arrivals at 40/s take ~0.15 s on average: the turn cannot end before the last one is due.
    assert m["seconds"] > 0, (name, m)
print("bench-serve open-loop JSON ok")
PY
# A bad rate is refused with a message naming the flag.
if "$BIN" bench-serve -m "$TMP/m.gguf" --rate inf >"$TMP/bad.txt" 2>&1; then echo "--rate inf accepted"; exit 1; fi
grep -q -- "--rate" "$TMP/bad.txt"
