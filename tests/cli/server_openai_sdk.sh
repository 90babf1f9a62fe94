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
source "$(dirname "$0")/lib/serve.sh"

start_server "$BIN" -m "$M" -t "$SERVE_THREADS" --max-tokens-limit 64 --max-steps 64
BICACHE_URL=$URL timeout 300 node "$SRC/tests/server/sdk_test.mjs"
