#!/usr/bin/env bash
# `bicache serve` access and overload behaviour: --api-key (401 authentication_error, /health
# open) and a full queue (429 + Retry-After; --max-queue 0 refuses every request, which makes the
# overload path deterministic to test). Every wait is bounded in count.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
source "$(dirname "$0")/lib/serve.sh"

start() { start_server "$BIN" -m "$M" -t "$SERVE_THREADS" "$@"; }
BODY='{"prompt":"hi","max_tokens":4}'

start --api-key s3cret
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$URL/v1/completions" -d "$BODY")
check "no key: 401" [ "$st" = 401 ]
check "no key: authentication_error" jqtest '.error.type == "authentication_error"'
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$URL/v1/models" -H 'Authorization: Bearer s3cre')
check "wrong key: 401" [ "$st" = 401 ]
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$URL/v1/completions" -H 'Authorization: Bearer s3cret' -d "$BODY")
check "right key: 200" [ "$st" = 200 ]
check "/health open without a key" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]
check "/metrics open without a key" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/metrics")" = 200 ]
# A second server on the port in use fails with the reason (with SO_REUSEPORT it would bind too and
# take half of the connections; the listener sets SO_REUSEADDR only).
port=${URL##*:}
rc=0
timeout 60 "$BIN" serve -m "$M" -t 1 --host 127.0.0.1 --port "$port" >"$TMP/second" 2>&1 || rc=$?
cp "$TMP/second" "$TMP/body"
check "port in use: second server exits 2" [ "$rc" = 2 ]
check "port in use: says so" grep -q "cannot listen on 127.0.0.1:$port: Address already in use" "$TMP/second"
check "first server still answers" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]
stop

start --max-queue 0
st=$(curl -s -D "$TMP/headers" -o "$TMP/body" -w '%{http_code}' "$URL/v1/completions" -d "$BODY")
check "full queue: 429" [ "$st" = 429 ]
check "full queue: Retry-After" grep -qi '^retry-after:' "$TMP/headers"
check "full queue: error body" jqtest '(.error.message | type == "string") and (.error.type | type == "string")'
curl -s -o "$TMP/body" "$URL/metrics"
check "rejections counted" grep -q '^bicache_requests_rejected_total{[^}]*} 1$' "$TMP/body"
check "/health still 200" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]
stop
exit $fail
