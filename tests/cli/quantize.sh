#!/usr/bin/env bash
# `bicache quantize IN OUT TYPE`: a random-weight LLaDA at K-quant-compatible widths (d 256,
# made at test time by tools/gguf_py/make_random_model.py) and the embedded model (d_ff 704: its
# ffn_down rows fall back) are quantized to several types; `bicache info` must report the new
# types, general.file_type and general.quantization_version, and `bicache logits` on the
# quantized file must stay close to the original's (relative RMS bounds below, measured with
# about 2x margin), and the quantized embedded model must still answer a document question with
# `bicache generate`. Then the error cases: unknown TYPE, missing input, OUT == IN, unwritable OUT.
set -euo pipefail
BIN=$1
SRC=$2
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

"$PY" "$SRC/tools/gguf_py/make_random_model.py" "$TMP/rand.gguf" --d 256 --ff 512 --heads 4 --kv-heads 2 \
  --layers 2 --vocab 512 --type bf16

# compare REF GOT BOUND: relative RMS of the logits difference < BOUND
compare() {
  "$PY" - "$1" "$2" "$3" <<'PY'
import sys
import numpy as np
a = np.fromfile(sys.argv[1], dtype="<f4")
b = np.fromfile(sys.argv[2], dtype="<f4")
assert a.size == b.size and a.size > 0, (a.size, b.size)
rel = float(np.sqrt(np.mean((a - b) ** 2) / np.mean(a ** 2)))
print(f"{rel:.4f}")
sys.exit(0 if rel < float(sys.argv[3]) else 1)
PY
}

# check MODEL TOKENS NAME TYPE FILE_TYPE BOUND EXPECTED_TYPES_REGEX
check() {
  local model=$1 tokens=$2 name=$3 type=$4 ftype=$5 bound=$6 types=$7
  local out=$TMP/$name-$type.gguf
  if ! "$BIN" quantize "$model" "$out" "$type" >"$TMP/q.log" 2>&1; then
    bad "quantize $name $type:"; cat "$TMP/q.log"; return
  fi
  "$BIN" info -m "$out" >"$TMP/info.txt"
  if grep -qE "general.file_type +$ftype\$" "$TMP/info.txt" && grep -qE "general.quantization_version +2\$" "$TMP/info.txt" &&
     grep -qE "^types:.*$types" "$TMP/info.txt"; then
    ok "$name $type: info reports file_type $ftype, quantization_version 2, types ~ $types"
  else
    bad "$name $type: info:"; grep -E 'file_type|quantization_version|^types' "$TMP/info.txt"
  fi
  "$BIN" logits -m "$out" --tokens "$tokens" --out "$TMP/$name-$type.f32" >/dev/null
  local rel
  if rel=$(compare "$TMP/$name-ref.f32" "$TMP/$name-$type.f32" "$bound"); then
    ok "$name $type: logits rel RMS $rel < $bound"
  else
    bad "$name $type: logits rel RMS $rel >= $bound"
  fi
}

TOK=1,2,3,4,5,6,7,8,511,511,511,511
"$BIN" logits -m "$TMP/rand.gguf" --tokens "$TOK" --out "$TMP/rand-ref.f32" >/dev/null
# Measured: Q8_0 0.014, Q6_K 0.041, Q5_K_M 0.075, Q4_K_M 0.16, Q4_0 0.21, Q5_1 0.077, Q8_0->Q4_K 0.18 (random
# weights compound the error through the layers).
check "$TMP/rand.gguf" $TOK rand Q8_0 7 0.03 'Q8_0: 16 tensors'
check "$TMP/rand.gguf" $TOK rand Q6_K 18 0.08 'Q6_K: 16 tensors'
check "$TMP/rand.gguf" $TOK rand Q5_K_M 17 0.15 'Q5_K: 13 tensors.*Q6_K: 3 tensors'
check "$TMP/rand.gguf" $TOK rand Q4_K_M 15 0.3 'Q4_K: 13 tensors.*Q6_K: 3 tensors'
check "$TMP/rand.gguf" $TOK rand Q4_0 2 0.4 'Q4_0: 16 tensors'
check "$TMP/rand.gguf" $TOK rand Q5_1 9 0.16 'Q5_1: 16 tensors'
# Requantizing a quantized source works (dequantized rows re-encoded).
check "$TMP/rand-Q8_0.gguf" $TOK rand Q4_K 14 0.3 'Q4_K: 16 tensors'

EMB=$SRC/models/tiny-llada.gguf
if [[ -f $EMB ]]; then
  ETOK=10,20,30,40,50,60,70,80,1693,1693,1693,1693
  "$BIN" logits -m "$EMB" --tokens "$ETOK" --out "$TMP/emb-ref.f32" >/dev/null
  # Measured: Q8_0 0.0067, Q6_K 0.019, Q5_K_M 0.027, Q4_K_M 0.067.
  check "$EMB" $ETOK emb Q8_0 7 0.015 'Q8_0'
  check "$EMB" $ETOK emb Q6_K 18 0.04 'Q6_K'
  check "$EMB" $ETOK emb Q5_K_M 17 0.055 'Q5_K'
  check "$EMB" $ETOK emb Q4_K_M 15 0.13 'Q4_K'
  # A quantized model still generates: the document question main_job.sh asks, answered from each file.
  for t in Q8_0 Q6_K Q5_K_M Q4_K_M; do
    ans=$("$BIN" generate -m "$TMP/emb-$t.gguf" --system "You answer questions about this document. The color of Zorvan is teal. Zorvan's city is Brill." \
      --chat "What is the color of Zorvan?" --gen-length 16 --steps 16 --block-length 16 2>/dev/null | tail -1)
    [[ $ans == *teal* ]] && ok "emb $t: generate answers '$ans'" || bad "emb $t: generate answered '$ans', expected teal"
  done
  # d_ff 704 is not a multiple of 256: ffn_down falls back (Q4_K -> Q5_0, Q6_K -> Q8_0) and is listed.
  if grep -q 'tensors fell back' "$TMP/q.log" && grep -q 'blk.1.ffn_down.weight (Q4_K -> Q5_0)' "$TMP/q.log" &&
     grep -q 'blk.0.ffn_down.weight (Q6_K -> Q8_0)' "$TMP/q.log"; then
    ok "emb Q4_K_M: ffn_down fallbacks listed"
  else
    bad "emb Q4_K_M: fallbacks not listed:"; tail -3 "$TMP/q.log"
  fi
else
  echo "skip embedded model checks: $EMB absent"
fi

# expect_error DESCRIPTION REGEX ARGS...: exit 2 and a message matching REGEX on stderr
expect_error() {
  local what=$1 re=$2
  shift 2
  local rc=0
  "$BIN" quantize "$@" >"$TMP/out.txt" 2>"$TMP/err.txt" || rc=$?
  if [[ $rc -eq 2 ]] && grep -qE "$re" "$TMP/err.txt"; then
    ok "error: $what ($(head -c 150 "$TMP/err.txt"))"
  else
    bad "error: $what: rc $rc, stderr:"; cat "$TMP/err.txt"
  fi
}
expect_error "unknown type" "unknown quantization type 'Q3_XX'.*Q8_0.*Q4_K_M" "$TMP/rand.gguf" "$TMP/x.gguf" Q3_XX
expect_error "missing input" "cannot read input '$TMP/none.gguf'" "$TMP/none.gguf" "$TMP/x.gguf" Q8_0
expect_error "output == input" "is the input file" "$TMP/rand.gguf" "$TMP/../$(basename "$TMP")/rand.gguf" Q8_0
expect_error "unwritable output" "cannot write output '$TMP/no/such/dir/x.gguf'" "$TMP/rand.gguf" "$TMP/no/such/dir/x.gguf" Q8_0
printf 'not a gguf file at all' >"$TMP/junk.gguf"
expect_error "input not GGUF" "format|magic|GGUF" "$TMP/junk.gguf" "$TMP/x.gguf" Q8_0
[[ ! -e $TMP/x.gguf && ! -e $TMP/x.gguf.partial ]] && ok "no output left behind by the failures" || bad "output left behind"
exit $fail
