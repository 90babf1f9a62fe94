#!/usr/bin/env bash
# The llada-moe fixture (tests/data/moe/llada-moe-tiny.gguf: 2 layers, 4 experts, top-2) and rnd1 through
# the CLI: `info` prints the expert layout, `generate` runs under every cache mode with the
# canvas filled, the same run twice gives the same tokens, and after `calibrate` the bicache mode
# reuses the depth its table gives.
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
cp "$SRC/tests/data/moe/llada-moe-tiny.gguf" "$TMP/moe.gguf"
M=$TMP/moe.gguf

"$BIN" info -m "$M" >"$TMP/info.txt"
if grep -q '^model: llada-moe ' "$TMP/info.txt" && grep -q '^experts: 4 per layer, top-2 per token' "$TMP/info.txt"; then
  echo "ok   info: llada-moe with 4 experts, top-2"
else
  echo "FAIL info lacks the expert layout:"; cat "$TMP/info.txt"; fail=1
fi

PREFIX="the quick brown fox jumps over the lazy dog. diffusion language models denoise a canvas of mask tokens in parallel; the model sees the whole sequence at once"
gen() {  # gen CACHE OUT: one JSON answer of 8 tokens
  "$BIN" generate -t 1 -m "$M" --prefix "$PREFIX" --prompt " the answer" --gen-length 8 --steps 4 \
    --cache "$1" --json >"$2" 2>"$TMP/gen.err"
}
for cache in none fixed:1 llm dual bicache+dual; do
  if gen "$cache" "$TMP/g.json" && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert len(j['tokens'])==8 and j['steps']==4, j" "$TMP/g.json"; then
    echo "ok   generate --cache $cache: 8 tokens in 4 steps"
  else
    echo "FAIL generate --cache $cache"; cat "$TMP/gen.err"; fail=1
  fi
done
gen none "$TMP/a.json"
gen none "$TMP/b.json"
if python3 -c "import json,sys; a,b=(json.load(open(p))['tokens'] for p in sys.argv[1:]); assert a==b, (a,b)" "$TMP/a.json" "$TMP/b.json"; then
  echo "ok   generate twice gives the same tokens"
else
  echo "FAIL generate is not deterministic"; fail=1
fi

"$BIN" calibrate -t 1 -m "$M" --limit 2 >"$TMP/cal.txt" 2>&1 || { echo "FAIL calibrate"; cat "$TMP/cal.txt"; fail=1; }
gen bicache "$TMP/bc.json"
if python3 -c "import json,sys; j=json.load(open(sys.argv[1])); c=j['cache']; assert c['mode']=='bicache' and c['depth']>0 and c['prefix_tokens']>0 and len(j['tokens'])==8, c" "$TMP/bc.json"; then
  echo "ok   generate --cache bicache after calibrate reuses the prefix ($(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['cache'])" "$TMP/bc.json"))"
else
  echo "FAIL generate --cache bicache after calibrate:"; cat "$TMP/bc.json" "$TMP/gen.err"; fail=1
fi
# RND1 (tests/data/moe/rnd1-tiny.gguf): renormalised top-k, head_dim 32 != d/n_head, tied output.
R=$SRC/tests/data/moe/rnd1-tiny.gguf
if "$BIN" info -m "$R" | grep -q '^experts: 4 per layer, top-2 per token (softmax router, chosen weights renormalised)'; then
  echo "ok   info: rnd1 renormalises the chosen weights"
else
  echo "FAIL info rnd1:"; "$BIN" info -m "$R" | tail -3; fail=1
fi
for cache in none dual; do
  if "$BIN" generate -t 1 -m "$R" --prompt "hello there" --gen-length 8 --steps 4 --cache "$cache" --json >"$TMP/r.json" 2>"$TMP/gen.err" \
    && python3 -c "import json,sys; j=json.load(open(sys.argv[1])); assert len(j['tokens'])==8, j" "$TMP/r.json"; then
    echo "ok   rnd1 generate --cache $cache: 8 tokens"
  else
    echo "FAIL rnd1 generate --cache $cache"; cat "$TMP/gen.err"; fail=1
  fi
done
exit $fail
