#!/usr/bin/env bash
# Regenerate the embedded tiny DLM: held-out suite, tokenizer, fixtures, training
# (resumes from tools/train/ckpt/latest.pt if present) and GGUF export.
#
#   tools/train/make_model.sh [MINUTES]      (default 85)
#
# Time: ~10 s for data + tokenizer + fixtures; training is time-budgeted by MINUTES
# of wall time (85 min on the 2-core CPU box, ~7.3M params, bf16 autocast);
# export ~5 s. Output: models/tiny-llada.gguf (bf16, ~15 MB).
# NOTE: tokenizer.json is deterministic; regenerating it does not invalidate a
# checkpoint as long as the suite vocabulary is unchanged (train.py asserts the
# vocab size matches the checkpoint config).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
MIN=${1:-85}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_WAIT_POLICY=PASSIVE
# glibc returns big buffers to the OS after every step otherwise (page-fault storm)
export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=1073741824
mkdir -p tests/data/suite tools/train/ckpt models
$PY tools/train/suite.py --heldout tests/data/suite/heldout.jsonl --test
$PY tools/train/bpe.py --out tools/train/tokenizer.json
$PY tools/train/make_fixtures.py
nice -n 10 $PY tools/train/train.py --minutes "$MIN" 2>&1 | tee -a tools/train/ckpt/train.log
$PY tools/train/export.py --out models/tiny-llada.gguf
