#!/usr/bin/env bash
# tools/gguf_py/convert_hf_llada2.py on synthetic Hugging Face LLaDA2.x checkpoints (the
# checkpoint's own names, F32 and BF16 safetensors in two shards): every converted tensor and
# llada2.* / diffusion.* key equals the tests/data/block llada2 fixture's
# (tools/reference/check_convert_hf_llada2.py, which also checks bad inputs), and the converted
# F32 file gives the PyTorch reference's logits through `bicache logits`.
# Usage: convert_hf_llada2.sh <bicache binary> <source dir>
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
export OMP_NUM_THREADS=1
"$PY" "$SRC/tools/reference/check_convert_hf_llada2.py" "$TMP" >"$TMP/check.txt" 2>&1 || { cat "$TMP/check.txt"; echo "FAIL check_convert_hf_llada2.py"; exit 1; }
grep '^ok' "$TMP/check.txt"
D=$SRC/tests/data/block
toks=$("$PY" -c "import json,sys; print(','.join(map(str, json.load(open(sys.argv[1]))['tokens'][:40])))" "$D/llada2_golden.json")
path=$(awk '/^FILE llada2/ {print $3}' "$TMP/check.txt")
"$BIN" logits -m "$path" --tokens "$toks" --out "$TMP/l.f32" >/dev/null
"$PY" - "$TMP/l.f32" "$D/llada2-tiny.logits.f32" <<'PY'
import sys
import numpy as np
got = np.fromfile(sys.argv[1], "<f4")
ref = np.fromfile(sys.argv[2], "<f4")[:got.size]
assert got.size == 40 * 300 and np.abs(got - ref).max() < 0.12, np.abs(got - ref).max()
PY
echo "ok   converted llada2: bicache logits match the reference's 40 rows"
