#!/usr/bin/env bash
# The block-diffusion fixtures (tests/data/block/: sdar and fast-dllm-v2, 2 layers) through the
# CLI: `info` prints the block layout, `logits` matches the PyTorch reference's rows, `generate`
# answers block by block (the same with the exact prefix cache as without) and refuses a length
# that is not whole blocks.
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
D=$SRC/tests/data/block

if "$BIN" info -m "$D/sdar-tiny.gguf" >"$TMP/info.txt" && grep -q '^model: sdar ' "$TMP/info.txt" &&
  grep -q '^attention: block-causal, block length 4, q/k norm per head, qkv bias no' "$TMP/info.txt"; then
  echo "ok   info: sdar, block-causal, block 4"
else
  echo "FAIL info sdar:"; cat "$TMP/info.txt"; fail=1
fi
if "$BIN" info -m "$D/fast-dllm-v2-tiny.gguf" >"$TMP/info.txt" &&
  grep -q '^attention: block-causal, block length 8, sub-block length 4, q/k norm none, qkv bias yes' "$TMP/info.txt" &&
  grep -q 'logits shifted' "$TMP/info.txt"; then
  echo "ok   info: fast-dllm-v2, block 8 of sub-blocks of 4, shifted"
else
  echo "FAIL info fast-dllm-v2:"; cat "$TMP/info.txt"; fail=1
fi

# The first 16 tokens of the golden sequence: two whole blocks of 8, so their rows equal the
# reference's rows for the 70-token sequence.
for name in sdar-tiny fast-dllm-v2-tiny; do
  toks=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(','.join(map(str, j['models'][0]['tokens'][:16])))" "$D/block_golden.json")
  if "$BIN" logits -m "$D/$name.gguf" --tokens "$toks" --out "$TMP/l.f32" >/dev/null &&
    python3 - "$TMP/l.f32" "$D/$name.logits.f32" <<'PY'; then
import struct, sys
got = open(sys.argv[1], "rb").read()
ref = open(sys.argv[2], "rb").read()[:len(got)]
g = struct.unpack(f"<{len(got) // 4}f", got)
r = struct.unpack(f"<{len(ref) // 4}f", ref)
err = max(abs(a - b) for a, b in zip(g, r))
assert len(g) == 16 * 300 and err < 0.12, err
PY
    echo "ok   logits $name: 16 rows match the reference"
  else
    echo "FAIL logits $name"; fail=1
  fi
done

# Block-wise generation: each model answers, and exact prefix reuse (`prefix`, and `bicache`, which
# is the same on these models) gives the answer of no cache.
for name in sdar-tiny fast-dllm-v2-tiny; do
  args=(generate -t 1 -m "$D/$name.gguf" --prefix "You are a helpful assistant. Answer briefly and well." --prompt "hello there, how are you" --gen-length 16 --steps 16 --json)
  if "$BIN" "${args[@]}" --cache bicache >"$TMP/a.json" 2>"$TMP/g.err" &&
    "$BIN" "${args[@]}" --cache prefix >"$TMP/c.json" 2>>"$TMP/g.err" &&
    "$BIN" "${args[@]}" --cache none >"$TMP/b.json" 2>>"$TMP/g.err" &&
    jq -e '.cache.depth == 2 and .cache.prefix_tokens > 0' "$TMP/c.json" >/dev/null &&
    [ "$(jq -c .tokens "$TMP/c.json")" = "$(jq -c .tokens "$TMP/b.json")" ] &&
    jq -e '.tokens | length > 0' "$TMP/a.json" >/dev/null &&
    [ "$(jq -c .tokens "$TMP/a.json")" = "$(jq -c .tokens "$TMP/b.json")" ]; then
    echo "ok   generate $name: answers, the same with and without the cache"
  else
    echo "FAIL generate $name:"; cat "$TMP/g.err" "$TMP/a.json" "$TMP/b.json" 2>/dev/null; fail=1
  fi
done
if "$BIN" generate -t 1 -m "$D/sdar-tiny.gguf" --prompt "hello" --gen-length 6 --steps 6 >"$TMP/g.txt" 2>"$TMP/g.err"; then
  echo "FAIL generate sdar with --gen-length 6 should refuse"; fail=1
elif grep -q "denoises blocks of 4 tokens" "$TMP/g.err"; then
  echo "ok   generate sdar refuses a length that is not whole blocks"
else
  echo "FAIL generate sdar error:"; cat "$TMP/g.err"; fail=1
fi
if "$BIN" generate -t 1 -m "$D/sdar-tiny.gguf" --prompt "hello" --gen-length 8 --block-length 8 >"$TMP/g.txt" 2>"$TMP/g.err"; then
  echo "FAIL generate sdar with --block-length 8 should refuse"; fail=1
elif grep -q "denoises its own blocks of 4 tokens" "$TMP/g.err"; then
  echo "ok   generate sdar refuses another block length"
else
  echo "FAIL generate sdar --block-length error:"; cat "$TMP/g.err"; fail=1
fi
exit $fail
