#!/usr/bin/env bash
# tools/train/import_gguf.py undoes the export exactly: the embedded model imported into a trainer
# checkpoint and exported again is the committed file byte for byte (weights, Q/K permutation,
# metadata, tokenizer). Usage: import_gguf_roundtrip.sh <bicache binary> <source dir>
set -euo pipefail
SRC="$2"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
export OMP_NUM_THREADS=1
"$PY" "$SRC/tools/train/import_gguf.py" --gguf "$SRC/models/tiny-llada.gguf" --out "$TMP/ckpt.pt" --step 1
"$PY" "$SRC/tools/train/export.py" --ckpt "$TMP/ckpt.pt" --out "$TMP/again.gguf"
if cmp -s "$SRC/models/tiny-llada.gguf" "$TMP/again.gguf"; then
  echo "ok   import + export reproduces models/tiny-llada.gguf byte for byte"
else
  echo "FAIL import + export differs from models/tiny-llada.gguf"
  cmp "$SRC/models/tiny-llada.gguf" "$TMP/again.gguf" | head -3 || true
  exit 1
fi
