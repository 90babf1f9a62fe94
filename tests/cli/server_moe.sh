#!/usr/bin/env bash
# `bicache serve` on the mixture-of-experts fixture (tests/data/moe/llada-moe-tiny.gguf): two chat
# completions sharing a system prompt are answered, the second reuses the first's cached prefix
# (a lookup hit in /metrics), and a streamed one ends with [DONE]. Every wait is bounded.
set -euo pipefail
BIN=$1
SRC=$2
source "$(dirname "$0")/lib/serve.sh"

start_server "$BIN" -m "$SRC/tests/data/moe/llada-moe-tiny.gguf" -t "$SERVE_THREADS" --cache fixed:1
echo "server at $URL"

post() {  # post <body> -> status on stdout, body in $TMP/body
  curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$URL/v1/chat/completions" \
    -H 'Content-Type: application/json' --data-binary "$1"
}
SYS="the quick brown fox jumps over the lazy dog. diffusion language models denoise a canvas of mask tokens in parallel"
for q in "first question" "second question"; do
  st=$(post "{\"messages\":[{\"role\":\"system\",\"content\":\"$SYS\"},{\"role\":\"user\",\"content\":\"$q\"}],\"max_tokens\":8,\"steps\":4}")
  check "chat completion 200 ($q)" [ "$st" = 200 ]
  check "an answer of 8 tokens ($q)" jqtest '.choices[0].message.content | type == "string"'
  check "usage counts 8 completion tokens ($q)" jqtest '.usage.completion_tokens == 8'
done
curl -s "$URL/metrics" >"$TMP/body"
hits=$(sed -n 's/^bicache_cache_lookup_hits_total[^ ]* \([0-9]*\).*/\1/p' "$TMP/body")
check "the second request reused the cached prefix (lookup hits: ${hits:-none})" [ "${hits:-0}" -ge 1 ]

curl -s -N -X POST "$URL/v1/completions" -H 'Content-Type: application/json' \
  --data-binary '{"prompt":"hello there","max_tokens":8,"steps":4,"stream":true}' >"$TMP/body"
check "a streamed completion ends with [DONE]" grep -q '^data: \[DONE\]' "$TMP/body"
stop
exit $fail
