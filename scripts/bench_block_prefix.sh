#!/usr/bin/env bash
# Exact prefix reuse at real width (docs/benchmarks.md, "Block-diffusion models"): serves a
# random-weight sdar file and times one request shape three ways -- its shared prefix built on the
# way (a miss), the same prefix cached (a hit), and no cache at all -- with the few-row kernels on
# (default routes) and off (BICACHE_FEW_ROWS=0). Prompts are token ids: PREFIX shared tokens, then
# a 32-token tail that differs from the first token on; the server finds the shared part itself
# (automatic prefix detection against the previous request).
#
#   bash scripts/bench_block_prefix.sh [BICACHE] [MODEL]
#   MODEL from: /usr/bin/python3 tools/gguf_py/make_random_model.py F.gguf --arch sdar --heads 32 \
#     --kv-heads 8 --vocab 151936 --layers 4 && bicache quantize F.gguf F-Q4_K_M.gguf Q4_K_M
#   PREFIX=1024 GEN=32 THREADS=2 ONLY_DEFAULT=1 (skip the run without the few-row kernels)
#
# Not part of `make test` (minutes per request at real width).
set -euo pipefail
BIN=${1:-build/bicache}
MODEL=${2:-/tmp/bicache-rw/sdar8b-width-L4-Q4_K_M.gguf}
PREFIX=${PREFIX:-1024}
GEN=${GEN:-32}
THREADS=${THREADS:-2}
TMP=$(mktemp -d)
PID=
cleanup() {
  local rc=$?
  [[ -n $PID ]] && kill "$PID" 2>/dev/null
  [[ $rc != 0 ]] && echo "--- failed; last response: $(head -c 300 "$TMP/resp" 2>/dev/null)"
  rm -rf "$TMP"
}
trap cleanup EXIT

body() {  # body <tail seed> <cache> -> JSON on stdout
  /usr/bin/python3 - "$PREFIX" "$GEN" "$1" "$2" <<'PY'
import json, sys
prefix, gen, seed, cache = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ids = [300 + (i * 7919) % 600 for i in range(prefix)]  # ids below 1000: any vocabulary here
ids += [10 + seed * 60 + j for j in range(32)]  # the tails differ from their first token on
print(json.dumps({"prompt": ids, "max_tokens": gen, "cache": cache}))
PY
}

run() {  # run <label> [env...]: one server, four requests
  local label=$1
  shift
  env "$@" "$BIN" serve -m "$MODEL" -t "$THREADS" --host 127.0.0.1 --port 0 --cache prefix \
    --max-prompt-tokens 0 >"$TMP/log" 2>&1 &
  PID=$!
  local url=
  for _ in $(seq 1 600); do
    url=$(sed -n 's/^bicache: listening on \(http:[^ ]*\)$/\1/p' "$TMP/log")
    [[ -n $url ]] && [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/health") == 200 ]] && break
    sleep 0.5
  done
  local i cache t
  for i in 1 2 3 4; do
    cache=prefix
    [[ $i == 4 ]] && cache=none
    body "$i" "$cache" >"$TMP/req"
    t=$(curl -s -o "$TMP/resp" -w '%{time_total}' "$url/v1/completions" \
      -H 'Content-Type: application/json' --data-binary "@$TMP/req")
    printf '%-10s request %d (%-6s): %7.2f s  %s\n' "$label" "$i" "$cache" "$t" \
      "$(jq -c '.bicache | {prefix_tokens, depth, hit}' "$TMP/resp")"
    echo "$t" >"$TMP/t$i"
  done
  kill "$PID"
  wait "$PID" 2>/dev/null || true
  PID=
  /usr/bin/python3 -c "
m, h, n = (float(open('$TMP/t%d' % i).read()) for i in (2, 3, 4))
print('$label: hit / miss = %.2f, hit / no cache = %.2f' % (h / m, h / n))"
}

lscpu | sed -n 's/^Model name:[[:space:]]*/cpu: /p'
echo "model: $MODEL, prefix $PREFIX tokens, tail 32, gen $GEN, -t $THREADS"
run few-rows
[[ ${ONLY_DEFAULT:-0} == 1 ]] || run no-few-rows BICACHE_FEW_ROWS=0
