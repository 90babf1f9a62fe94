#!/usr/bin/env bash
# tools/gguf_py/convert_hf_block.py on synthetic Hugging Face checkpoints (SDAR / Fast-dLLM v2
# names, F32 and BF16 safetensors): every converted tensor equals the tests/data/block fixture's
# (tools/reference/check_convert_hf_block.py, which also checks bad inputs), and the converted
# F32 files give the PyTorch reference's logits through `bicache logits`.
# Usage: convert_hf_block.sh <bicache binary> <source dir>
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
export OMP_NUM_THREADS=1
fail=0
"$PY" "$SRC/tools/reference/check_convert_hf_block.py" "$TMP" >"$TMP/check.txt" 2>&1 || { cat "$TMP/check.txt"; echo "FAIL check_convert_hf_block.py"; exit 1; }
grep '^ok' "$TMP/check.txt"
D=$SRC/tests/data/block
toks=$("$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print(','.join(map(str, j['models'][0]['tokens'][:40])))" "$D/block_golden.json")
while read -r _ arch path; do
  if "$BIN" logits -m "$path" --tokens "$toks" --out "$TMP/l.f32" >/dev/null &&
    "$PY" - "$TMP/l.f32" "$D/$arch-tiny.logits.f32" <<'PY'; then
import sys
import numpy as np
got = np.fromfile(sys.argv[1], "<f4")
ref = np.fromfile(sys.argv[2], "<f4")[:got.size]
assert got.size == 40 * 300 and np.abs(got - ref).max() < 0.12, np.abs(got - ref).max()
PY
    echo "ok   converted $arch: bicache logits match the reference's 40 rows"
  else
    echo "FAIL converted $arch logits"; fail=1
  fi
done < <(grep '^FILE' "$TMP/check.txt")
exit $fail
