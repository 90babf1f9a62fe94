#!/usr/bin/env bash
# `bicache tokenize`: one comma-separated line of ids per input line (checked against the
# tokenizer fixtures when the embedded model is present). `bicache logits`: writes
# n_tokens * n_vocab float32 values and one summary line per position; bad --tokens are refused;
# BICACHE_MATMUL=f32 gives the same logits.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

printf 'hello world\n\nThe color of Kavan is teal.\n  two  spaces \n' >"$TMP/lines.txt"
"$BIN" tokenize -m "$M" --file "$TMP/lines.txt" >"$TMP/ids.txt"
if [[ $(wc -l <"$TMP/ids.txt") -eq 4 ]]; then echo "ok   tokenize: 4 lines in, 4 lines out"; else echo "FAIL tokenize line count:"; cat "$TMP/ids.txt"; fail=1; fi
if grep -qvE '^([0-9]+(,[0-9]+)*)?$' "$TMP/ids.txt"; then echo "FAIL tokenize output is not comma-separated ids:"; cat "$TMP/ids.txt"; fail=1; else echo "ok   tokenize: comma-separated ids"; fi
if [[ -z $(sed -n 2p "$TMP/ids.txt") && -n $(sed -n 1p "$TMP/ids.txt") ]]; then echo "ok   tokenize: empty line -> empty line"; else echo "FAIL tokenize empty line handling"; fail=1; fi
# Standard input gives the same as --file.
"$BIN" tokenize -m "$M" <"$TMP/lines.txt" >"$TMP/ids_stdin.txt"
if cmp -s "$TMP/ids.txt" "$TMP/ids_stdin.txt"; then echo "ok   tokenize: stdin == --file"; else echo "FAIL tokenize: stdin differs from --file"; fail=1; fi

EMB=$SRC/models/tiny-llada.gguf
if [[ -f $EMB ]]; then
  # Fixture texts that fit on one line (the first 12 such), and their expected ids.
  python3 - "$SRC/tests/data/tokenizer_fixtures.json" "$TMP/fx_text.txt" "$TMP/fx_ids.txt" <<'PY'
import json, sys
fx = [f for f in json.load(open(sys.argv[1]))["fixtures"] if "\n" not in f["text"] and "\r" not in f["text"]][:12]
with open(sys.argv[2], "w", newline="\n") as t, open(sys.argv[3], "w") as i:
    for f in fx:
        t.write(f["text"] + "\n")
        i.write(",".join(map(str, f["ids"])) + "\n")
PY
  "$BIN" tokenize -m "$EMB" --file "$TMP/fx_text.txt" >"$TMP/fx_got.txt"
  if cmp -s "$TMP/fx_ids.txt" "$TMP/fx_got.txt"; then
    echo "ok   tokenize matches $(wc -l <"$TMP/fx_ids.txt") tokenizer fixtures"
  else
    echo "FAIL tokenize differs from tokenizer fixtures:"; diff "$TMP/fx_ids.txt" "$TMP/fx_got.txt" || true; fail=1
  fi
else
  echo "skip fixture comparison: $EMB not present"
fi

# logits: 5 tokens x vocab (300 in the golden llada) x 4 bytes.
vocab=$("$BIN" info -m "$M" | sed -n 's/.*vocab \([0-9]*\),.*/\1/p')
"$BIN" logits -m "$M" --tokens 1,2,3,4,5 --out "$TMP/logits.f32" >"$TMP/logits.txt"
size=$(stat -c %s "$TMP/logits.f32")
if [[ -n $vocab && $size -eq $((5 * vocab * 4)) ]]; then echo "ok   logits: $size bytes = 5 x $vocab x 4"; else echo "FAIL logits size $size (vocab '$vocab')"; fail=1; fi
if [[ $(grep -c '^  pos [0-9]*: token' "$TMP/logits.txt") -eq 5 ]]; then echo "ok   logits: one summary line per position"; else echo "FAIL logits summary:"; cat "$TMP/logits.txt"; fail=1; fi
python3 - "$TMP/logits.f32" <<'PY' || fail=1
import struct, sys, math
data = open(sys.argv[1], "rb").read()
vals = struct.unpack("<%df" % (len(data) // 4), data)
assert all(math.isfinite(v) for v in vals), "non-finite logits"
print("ok   logits: all values finite")
PY

for bad in "1,,2" "abc" "-1" "1,2x" "" "99999999999" "1,2,"; do
  rc=0
  "$BIN" logits -m "$M" --tokens "$bad" >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [[ $rc -eq 2 ]] && grep -q '^bicache: .*\(--tokens\|--prompt\)' "$TMP/err"; then
    echo "ok   logits --tokens '$bad' refused: $(head -n1 "$TMP/err")"
  else
    echo "FAIL logits --tokens '$bad': exit $rc"; cat "$TMP/err"; fail=1
  fi
done
rc=0
"$BIN" tokenize -m "$M" --file "$TMP" >"$TMP/out" 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q 'is a directory' "$TMP/err"; then echo "ok   tokenize --file DIR refused"; else echo "FAIL tokenize --file DIR: exit $rc"; cat "$TMP/err"; fail=1; fi
# An id outside the vocabulary is a request error, not a crash.
rc=0
"$BIN" logits -m "$M" --tokens "1,$vocab" >"$TMP/out" 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q '^bicache: ' "$TMP/err"; then echo "ok   logits token id $vocab (= vocab) refused: $(head -n1 "$TMP/err")"; else echo "FAIL logits out-of-vocab id: exit $rc"; cat "$TMP/err"; fail=1; fi

# The f32 matmul path (BICACHE_MATMUL=f32, what CPUs without a oneDNN bf16 kernel run): `info`
# says which path runs, and its logits match the default path's (the same bf16-rounded operands;
# only summation order differs where the default is bf16).
if "$BIN" info -m "$M" | grep -q '^matmul: oneDNN \(bf16\|f32\)'; then echo "ok   info names the matmul precision"; else echo "FAIL info has no matmul line"; fail=1; fi
if BICACHE_MATMUL=f32 "$BIN" info -m "$M" | grep -q '^matmul: oneDNN f32'; then echo "ok   BICACHE_MATMUL=f32: info says f32"; else echo "FAIL BICACHE_MATMUL=f32 not reported by info"; fail=1; fi
BICACHE_MATMUL=f32 "$BIN" logits -m "$M" --tokens 1,2,3,4,5 --out "$TMP/logits32.f32" >/dev/null
python3 - "$TMP/logits.f32" "$TMP/logits32.f32" "$vocab" <<'PY' || fail=1
import struct, sys
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
assert len(a) == len(b), (len(a), len(b))
n = len(a) // 4
x, y = struct.unpack("<%df" % n, a), struct.unpack("<%df" % n, b)
v = int(sys.argv[3])
diff = max(abs(p - q) for p, q in zip(x, y))
scale = max(abs(p) for p in x)
assert diff <= 0.02 * scale, "f32 path logits differ by %g (max |logit| %g)" % (diff, scale)
am = lambda z, r: max(range(v), key=lambda i: z[r * v + i])
same = sum(am(x, r) == am(y, r) for r in range(n // v))
assert same == n // v, "argmax differs at %d of %d positions" % (n // v - same, n // v)
print("ok   f32 matmul path: logits within %.2g of the default path's (max |logit| %.3g), same argmax" % (diff, scale))
PY

exit $fail
