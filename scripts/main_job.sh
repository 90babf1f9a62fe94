#!/usr/bin/env bash
# The README's main job on the embedded model: what the model is, one answer with BiCache on, then
# the side-by-side comparison of cache modes (`bicache bench`) when it is built in.
set -euo pipefail
BIN=${1:-build/bicache}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODEL=${BICACHE_MODEL:-$ROOT/models/tiny-llada.gguf}
if [ ! -f "$MODEL" ]; then
  echo "note: $MODEL is not there yet; using the small generated test model instead" >&2
  MODEL=$ROOT/tests/data/golden/llada-tiny.gguf
fi
"$BIN" info -m "$MODEL" | tail -n 3
echo
echo "== one chat request, BiCache on =="
"$BIN" generate -m "$MODEL" --system "You answer questions about this document. The color of Zorvan is teal. Zorvan's city is Brill." \
  --chat "What is the color of Zorvan?" --cache bicache --json
if "$BIN" bench --help >/dev/null 2>&1; then
  echo
  echo "== cache modes side by side (bicache bench) =="
  "$BIN" bench -m "$MODEL" --json "$ROOT/build/bench.json"
fi
