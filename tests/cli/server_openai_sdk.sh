#!/usr/bin/env bash
# `bicache serve` driven by the official openai npm SDK (tests/server/sdk_test.mjs). Needs Node.js
# and tests/server/node_modules (`npm ci --prefix tests/server`); prints SKIP and passes without
# them, so builds without network access still pass.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
if ! command -v node >/dev/null || [[ ! -d $SRC/tests/server/node_modules/openai ]]; then
  echo "SKIP: node or tests/server/node_modules missing (run: npm ci --prefix tests/server)"
  exit 0
fi
TMP=$(mktemp -d)
PID=
cleanup() { [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

"$BIN" serve -m "$M" --port 0 -t 2 --max-tokens-limit 64 --max-steps 64 >"$TMP/log" 2>&1 &
PID=$!
URL=
for _ in $(seq 1 300); do
  URL=$(sed -n 's/^bicache: listening on \(http:[^ ]*\)$/\1/p' "$TMP/log")
  [[ -n $URL ]] && break
  sleep 0.1
done
[[ -n $URL ]] || { echo "FAIL: no listening line"; cat "$TMP/log"; exit 1; }
for _ in $(seq 1 300); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "$URL/health") == 200 ]] && break
  sleep 0.1
done
BICACHE_URL=$URL timeout 300 node "$SRC/tests/server/sdk_test.mjs"
