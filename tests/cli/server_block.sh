#!/usr/bin/env bash
# `bicache serve` on the block-diffusion fixtures (tests/data/block): completions are answered block
# by block, the second request with the same leading whole blocks reuses them exactly (a lookup
# hit in /metrics, the same text as without the cache), a streamed one ends with [DONE], and a
# length or block length the model cannot denoise gets a 400 naming the field. Bounded waits.
set -euo pipefail
BIN=$1
SRC=$2
source "$(dirname "$0")/lib/serve.sh"

post() {  # post <body> -> status on stdout, body in $TMP/body
  curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$URL/v1/completions" \
    -H 'Content-Type: application/json' --data-binary "$1"
}
PREFIX="the quick brown fox jumps over the lazy dog. diffusion language models denoise blocks. "
PROMPT="hello there"
for name in sdar-tiny fast-dllm-v2-tiny; do
  start_server "$BIN" -m "$SRC/tests/data/block/$name.gguf" -t "$SERVE_THREADS" --cache prefix
  for q in first second; do
    st=$(post "{\"prefix\":\"$PREFIX\",\"prompt\":\"the $q question\",\"max_tokens\":16}")
    check "$name: $q completion: 200" [ "$st" = 200 ]
    check "$name: $q completion: 16 tokens" jqtest '.usage.completion_tokens == 16'
    check "$name: $q completion: reuses whole blocks of the prefix at every layer" \
      jqtest '.bicache.prefix_tokens >= 8 and .bicache.prefix_tokens % 4 == 0 and .bicache.depth == 2'
    jq -r '.choices[0].text' "$TMP/body" >"$TMP/text-$q"
  done
  st=$(post "{\"prefix\":\"$PREFIX\",\"prompt\":\"the second question\",\"max_tokens\":16,\"cache\":\"none\"}")
  check "$name: uncached: 200" [ "$st" = 200 ]
  jq -r '.choices[0].text' "$TMP/body" >"$TMP/text-none"
  check "$name: the cache hit answers as without the cache" cmp -s "$TMP/text-none" "$TMP/text-second"
  curl -s "$URL/metrics" >"$TMP/body"
  hits=$(sed -n 's/^bicache_cache_lookup_hits_total[^ ]* \([0-9]*\).*/\1/p' "$TMP/body")
  check "$name: the second request hit the cache (lookup hits: ${hits:-none})" [ "${hits:-0}" -ge 1 ]
  curl -s -N -X POST "$URL/v1/completions" -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\":\"$PROMPT\",\"max_tokens\":8,\"stream\":true}" >"$TMP/body"
  check "$name: a streamed completion ends with [DONE]" grep -q '^data: \[DONE\]' "$TMP/body"
  st=$(post '{"prompt":"hello","max_tokens":6}')
  check "$name: max_tokens 6 (not whole blocks): 400" [ "$st" = 400 ]
  check "$name: ... naming max_tokens" jqtest '.error.param == "max_tokens"'
  st=$(post '{"prompt":"hello","max_tokens":16,"block_length":16}')
  check "$name: block_length 16: 400" [ "$st" = 400 ]
  check "$name: ... naming block_length" jqtest '.error.param == "block_length"'
  stop
done
exit $fail
