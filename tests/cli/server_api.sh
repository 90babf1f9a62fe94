#!/usr/bin/env bash
# `bicache serve` end to end with curl: the OpenAI routes, streaming, metrics, and every bad input
# of the serving contract answered with the right 4xx and an OpenAI error body, the server still
# healthy afterwards. Every wait is bounded in count; nothing asserts on wall time.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
source "$(dirname "$0")/lib/serve.sh"

start_server "$BIN" -m "$M" -t "$SERVE_THREADS" --max-tokens-limit 64 --max-steps 64 \
  --max-body-bytes 65536 --cache fixed:1
echo "server at $URL"

# call <method> <path> <body-file-or-empty> -> status on stdout, body in $TMP/body
call() {
  local args=(-s -o "$TMP/body" -w '%{http_code}' -X "$1" "$URL$2" -H 'Content-Type: application/json')
  [[ -n ${3:-} ]] && args+=(--data-binary "@$3")
  curl "${args[@]}"
}

# ---- happy paths ---------------------------------------------------------------------------
st=$(call GET /v1/models)
check "models 200" [ "$st" = 200 ]
check "models list" jqtest '.object == "list" and (.data[0].object == "model") and (.data[0].id | type == "string")'
CTX=$(jq -r '.data[0].max_model_len' "$TMP/body")

echo '{"prompt":"Hello there","max_tokens":8,"steps":8,"seed":3,"temperature":0.7}' >"$TMP/c.json"
st=$(call POST /v1/completions "$TMP/c.json")
check "completion 200" [ "$st" = 200 ]
check "completion body" jqtest '.object == "text_completion" and (.choices[0].text | type == "string") and (.choices[0].finish_reason | IN("stop","length")) and .usage.completion_tokens >= 0'
cp "$TMP/body" "$TMP/first.json"
st=$(call POST /v1/completions "$TMP/c.json")
check "same seed, same text" [ "$(jq -r '.choices[0].text' "$TMP/body")" = "$(jq -r '.choices[0].text' "$TMP/first.json")" ]

echo '{"prompt":[1,2,3,4],"prefix":"A shared document.","max_tokens":8,"block_length":4}' >"$TMP/t.json"
st=$(call POST /v1/completions "$TMP/t.json")
check "token prompt + prefix 200" [ "$st" = 200 ]

chat='{"messages":[{"role":"system","content":"You read a long shared document."},{"role":"user","content":"Q?"}],"max_tokens":8}'
echo "$chat" >"$TMP/chat.json"
st=$(call POST /v1/chat/completions "$TMP/chat.json")
check "chat 200" [ "$st" = 200 ]
check "chat body" jqtest '.object == "chat.completion" and .choices[0].message.role == "assistant" and (.choices[0].message.content | type == "string")'
st=$(call POST /v1/chat/completions "$TMP/chat.json")
check "chat prefix reused (fixed:1)" jqtest '.bicache.hit == true and .bicache.depth == 1'
check "refresh default (8, docs/serving.md)" jqtest '.bicache.refresh == 8'
jq '. + {"refresh": 4}' "$TMP/chat.json" >"$TMP/chat_r.json"
st=$(call POST /v1/chat/completions "$TMP/chat_r.json")
check "chat with refresh 200" [ "$st" = 200 ]
check "refresh echoed" jqtest '.bicache.refresh == 4 and .bicache.hit == true and (.choices[0].message.content | type == "string")'
# A lone user turn has no shared prefix (docs/bicache.md: system prompt and earlier turns): twice,
# and neither is a cache hit.
echo '{"messages":[{"role":"user","content":"Q?"}],"max_tokens":8}' >"$TMP/lone.json"
st=$(call POST /v1/chat/completions "$TMP/lone.json")
st=$(call POST /v1/chat/completions "$TMP/lone.json")
check "lone user turn: no prefix, no hit" jqtest '.bicache.prefix_tokens == 0 and .bicache.hit == false'

echo '{"messages":[{"role":"user","content":"stream me"}],"max_tokens":16,"block_length":4,"stream":true,"stream_options":{"include_usage":true}}' >"$TMP/s.json"
curl -s -N --max-time 120 "$URL/v1/chat/completions" -H 'Content-Type: application/json' --data-binary "@$TMP/s.json" >"$TMP/sse"
check "stream ends with [DONE]" [ "$(grep '^data: ' "$TMP/sse" | tail -n1)" = "data: [DONE]" ]
grep '^data: {' "$TMP/sse" | sed 's/^data: //' >"$TMP/chunks"
check "stream: one id" [ "$(jq -r .id "$TMP/chunks" | sort -u | wc -l)" = 1 ]
check "stream: role first" [ "$(head -n1 "$TMP/chunks" | jq -r '.choices[0].delta.role')" = assistant ]
check "stream: finish_reason" [ "$(jq -r 'select(.choices | length > 0) | .choices[0].finish_reason // empty' "$TMP/chunks" | tail -n1 | grep -cE '^(stop|length)$')" = 1 ]
check "stream: usage chunk" [ "$(tail -n1 "$TMP/chunks" | jq '.usage.total_tokens > 0')" = true ]
echo '{"prompt":"stream plain","max_tokens":8,"stream":true}' >"$TMP/s2.json"
curl -s -N --max-time 120 "$URL/v1/completions" -H 'Content-Type: application/json' --data-binary "@$TMP/s2.json" >"$TMP/sse2"
check "completion stream ends with [DONE]" [ "$(grep '^data: ' "$TMP/sse2" | tail -n1)" = "data: [DONE]" ]

# A client that leaves mid-stream: its request is cancelled or finishes; either way no pin leaks.
echo '{"prompt":"long","max_tokens":64,"steps":64,"stream":true}' >"$TMP/long.json"
curl -s -N --max-time 0.3 "$URL/v1/completions" --data-binary "@$TMP/long.json" >/dev/null 2>&1 || true

st=$(call GET /metrics)
for name in vllm:num_requests_running vllm:num_requests_waiting vllm:gpu_cache_usage_perc \
  vllm:gpu_prefix_cache_hits_total vllm:gpu_prefix_cache_queries_total bicache_cache_bytes \
  bicache_cache_pinned_bytes bicache_cache_evictions_total bicache_depth_bucket; do
  check "metric $name" grep -q "^$name{" "$TMP/body"
done

# ---- bad inputs: each a 4xx with an OpenAI error body --------------------------------------
# bad <label> <path> <want-status> <body>
bad() {
  printf '%s' "$4" >"$TMP/bad.json"
  local st
  st=$(call POST "$2" "$TMP/bad.json")
  if [[ $st == "$3" ]] && jqtest '(.error.message | type == "string") and (.error.type | type == "string") and (.error | has("param")) and (.error | has("code"))'; then
    echo "ok   $1 ($st): $(jq -r .error.message "$TMP/body" | head -c 120)"
  else
    echo "FAIL $1: status $st (want $3): $(head -c 300 "$TMP/body")"; fail=1
  fi
}
C=/v1/completions
H=/v1/chat/completions
bad "not json" $C 400 '{"prompt": "x",'
bad "json list" $C 400 '[1,2]'
bad "json number" $C 400 '42'
bad "json null" $C 400 'null'
bad "missing prompt" $C 400 '{}'
bad "prompt wrong type" $C 400 '{"prompt": 5}'
bad "empty prompt" $C 400 '{"prompt": ""}'
bad "empty token prompt" $C 400 '{"prompt": []}'
bad "token id too big" $C 400 '{"prompt": [1, 99999999]}'
bad "token id negative" $C 400 '{"prompt": [-1]}'
bad "token id huge" $C 400 '{"prompt": [18446744073709551615]}'
bad "token id float" $C 400 '{"prompt": [1.5]}'
bad "max_tokens string" $C 400 '{"prompt": "x", "max_tokens": "8"}'
bad "max_tokens zero" $C 400 '{"prompt": "x", "max_tokens": 0}'
bad "max_tokens negative" $C 400 '{"prompt": "x", "max_tokens": -5}'
bad "max_tokens over limit" $C 400 '{"prompt": "x", "max_tokens": 65}'
bad "max_tokens 2^63" $C 400 '{"prompt": "x", "max_tokens": 9223372036854775807}'
bad "temperature negative" $C 400 '{"prompt": "x", "temperature": -1}'
bad "temperature string" $C 400 '{"prompt": "x", "temperature": "hot"}'
bad "top_p zero" $C 400 '{"prompt": "x", "top_p": 0}'
bad "top_p above 1" $C 400 '{"prompt": "x", "top_p": 1.5}'
bad "top_k negative" $C 400 '{"prompt": "x", "top_k": -1}'
bad "steps zero" $C 400 '{"prompt": "x", "steps": 0}'
bad "steps negative" $C 400 '{"prompt": "x", "steps": -3}'
bad "steps over limit" $C 400 '{"prompt": "x", "steps": 65}'
bad "block not dividing" $C 400 '{"prompt": "x", "max_tokens": 8, "block_length": 3}'
bad "block negative" $C 400 '{"prompt": "x", "block_length": -1}'
bad "seed negative" $C 400 '{"prompt": "x", "seed": -1}'
bad "seed 2^63 written as a float" $C 400 '{"prompt": "x", "seed": 9223372036854775808.0}'
check "seed range error names it" jqtest '.error.param == "seed"'
# Values inside a range whose float rounding lands on its bound are judged as sent.
echo '{"prompt": "x", "max_tokens": 4, "threshold": 0.99999999999}' >"$TMP/edge1.json"
check "threshold just under 1 accepted" [ "$(call POST $C "$TMP/edge1.json")" = 200 ]
echo '{"prompt": "x", "max_tokens": 4, "top_p": 1e-46}' >"$TMP/edge2.json"
check "top_p just over 0 accepted" [ "$(call POST $C "$TMP/edge2.json")" = 200 ]
bad "temperature just over 2" $C 400 '{"prompt": "x", "temperature": 2.0000000001}'
# `curl -d` sends a form Content-Type; a JSON body over 8 KiB (a common cap on form bodies) and under
# --max-body-bytes is still read and parsed as JSON.
{ printf '{"prompt": "Hello", "max_tokens": 4}'; head -c 20000 /dev/zero | tr '\0' ' '; } >"$TMP/formbig.json"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$URL$C" -d "@$TMP/formbig.json")
check "20 KB body sent with curl -d: 200" [ "$st" = 200 ]
bad "threshold 1" $C 400 '{"prompt": "x", "threshold": 1}'
bad "unknown algorithm" $C 400 '{"prompt": "x", "algorithm": "beam"}'
bad "unknown cache mode" $C 400 '{"prompt": "x", "cache": "fixed:-1"}'
bad "refresh negative" $C 400 '{"prompt": "x", "refresh": -1}'
check "refresh error names it" jqtest '.error.param == "refresh"'
bad "refresh over max steps" $C 400 '{"prompt": "x", "refresh": 65}'
bad "refresh not integer" $C 400 '{"prompt": "x", "refresh": 2.5}'
bad "stream not bool" $C 400 '{"prompt": "x", "stream": "yes"}'
bad "n = 2" $C 400 '{"prompt": "x", "n": 2}'
bad "prefix not string" $C 400 '{"prompt": "x", "prefix": 3}'
long=$(printf 'word %.0s' $(seq 1 $((CTX + 8))))
bad "prompt over context" $C 400 "{\"prompt\": \"$long\"}"
check "context message" jqtest '(.error.message | startswith("This model'"'"'s maximum context length is '"$CTX"' tokens")) and .error.code == "context_length_exceeded" and .error.param == "prompt"'
# The exact boundary: prompt + max_tokens == context passes, one more token fails.
ids=$(seq $((CTX - 8)) | sed "s/.*/5/" | paste -sd, -)  # no `yes | head`: SIGPIPE fails under pipefail
printf '{"prompt": [%s], "max_tokens": 8}' "$ids" >"$TMP/edge.json"
st=$(call POST $C "$TMP/edge.json")
check "exact context boundary 200" [ "$st" = 200 ]
bad "context boundary + 1" $C 400 "{\"prompt\": [$ids, 1], \"max_tokens\": 8}"
check "boundary + 1 is a context error" jqtest '.error.code == "context_length_exceeded"'
check "context error counts the max_tokens asked for" jqtest '.error.message | test("8 for the completion")'
bad "messages missing" $H 400 '{}'
bad "messages not list" $H 400 '{"messages": "hi"}'
bad "messages empty" $H 400 '{"messages": []}'
bad "message not object" $H 400 '{"messages": ["hi"]}'
bad "numeric role" $H 400 '{"messages": [{"role": 1, "content": "hi"}]}'
bad "numeric content" $H 400 '{"messages": [{"role": "user", "content": 5}]}'
bad "unknown role" $H 400 '{"messages": [{"role": "wizard", "content": "hi"}]}'
bad "no user turn" $H 400 '{"messages": [{"role": "system", "content": "hi"}]}'
bad "unknown route" /v1/nothing 404 '{}'
head -c 70000 /dev/zero | tr '\0' a >"$TMP/big"
st=$(call POST $C "$TMP/big")
check "body over --max-body-bytes is 413" [ "$st" = 413 ]

# ---- still serving, nothing pinned -----------------------------------------------------------
st=$(call POST /v1/completions "$TMP/c.json")
check "still serving after bad inputs" [ "$st" = 200 ]
pinned=
for _ in $(seq 1 100); do  # the cancelled stream's request may still be retiring
  call GET /metrics >/dev/null
  pinned=$(sed -n 's/^bicache_cache_pinned_bytes{[^}]*} //p' "$TMP/body")
  running=$(sed -n 's/^vllm:num_requests_running{[^}]*} //p' "$TMP/body")
  [[ $pinned == 0 && $running == 0 ]] && break
  sleep 0.1
done
check "no pinned bytes, nothing running" [ "$pinned" = 0 ]
check "health 200" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]

# ---- graceful shutdown -------------------------------------------------------------------------
kill -TERM "$PID"
rc=0
for _ in $(seq 1 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
wait "$PID" || rc=$?
PID=
check "SIGTERM exits 0" [ "$rc" = 0 ]
exit $fail
