#!/usr/bin/env bash
# Operator limits under attack (docs/hardening.md): every limit of `bicache serve`, exceeded, gets
# a clear OpenAI-style 4xx (413 body size; 400 prompt tokens, max_tokens, steps; 429 concurrency),
# and a flood of distinct long prefixes against a small --cache-budget-mb keeps the prefix cache
# within its budget (eviction) and the resident memory flat. Waits are bounded in count; the only
# timing assumption is that a 128-step request outlives a few curl calls.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
source "$(dirname "$0")/lib/serve.sh"

start() { start_server "$BIN" -m "$M" -t 1 "$@"; }
# post <path> <body> -> status on stdout, body in $TMP/body
post() {
  printf '%s' "$2" >"$TMP/req"
  curl -s -o "$TMP/body" -w '%{http_code}' "$URL$1" -H 'Content-Type: application/json' --data-binary "@$TMP/req"
}
# awk reads the whole page: stopping at the match could make curl fail on a closed pipe, and with
# pipefail that silently ended the script under `set -e`.
metric() { curl -s "$URL/metrics" | awk -v m="$1" '!found && ($1 ~ "^"m"[{ ]" || $1 == m) {print $2; found = 1}'; }
ids() { seq -s, 1 "$1"; }  # token ids 1..n (all inside the 300-token vocabulary)
C=/v1/completions
H=/v1/chat/completions

# ---- per-request limits --------------------------------------------------------------------
start --max-body-bytes 4096 --max-prompt-tokens 32 --max-tokens-limit 16 --max-steps 8
head -c 5000 /dev/zero | tr '\0' a >"$TMP/big"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' "$URL$C" --data-binary "@$TMP/big")
check "--max-body-bytes: 413" [ "$st" = 413 ]
check "--max-body-bytes: error body" jqtest '.error.type == "invalid_request_error" and (.error.message | test("too large"))'

st=$(post $C "{\"prompt\": [$(ids 32)], \"max_tokens\": 4, \"steps\": 4}")
check "--max-prompt-tokens: 32 of 32 accepted" [ "$st" = 200 ]
st=$(post $C "{\"prompt\": [$(ids 33)], \"max_tokens\": 4, \"steps\": 4}")
check "--max-prompt-tokens: 33 ids is 400" [ "$st" = 400 ]
check "--max-prompt-tokens: code and param" jqtest '.error.code == "prompt_too_long" and .error.param == "prompt"'
st=$(post $C '{"prompt": "'"$(printf 'word %.0s' $(seq 1 40))"'", "max_tokens": 4}')
check "--max-prompt-tokens: long text is 400" [ "$st" = 400 ]
st=$(post $H '{"messages": [{"role": "user", "content": "'"$(printf 'word %.0s' $(seq 1 40))"'"}], "max_tokens": 4}')
check "--max-prompt-tokens: long chat is 400" [ "$st" = 400 ]
check "--max-prompt-tokens: chat names messages" jqtest '.error.code == "prompt_too_long" and .error.param == "messages"'

# limit LABEL STATUS BODY [JQ]: POST BODY to $C; the status, and JQ on the answer when given.
limit() {
  local st
  st=$(post $C "$3")
  check "$1: $2" [ "$st" = "$2" ]
  [[ -z ${4:-} ]] || check "$1: body" jqtest "$4"
}
limit "--max-tokens-limit/--max-steps at the limit" 200 '{"prompt": "hi", "max_tokens": 16, "steps": 8}'
limit "--max-tokens-limit: 17" 400 '{"prompt": "hi", "max_tokens": 17}' \
  '.error.param == "max_tokens" and (.error.message | test("16"))'
limit "--max-steps: 9" 400 '{"prompt": "hi", "max_tokens": 8, "steps": 9}' '.error.param == "steps"'
# The default steps (one per token) stay within --max-steps; more blocks than steps allowed is a
# 400 naming block_length rather than a request run past the operator's limit.
limit "--max-steps: default steps capped" 200 '{"prompt": "hi", "max_tokens": 16, "cache": "none"}' '.bicache.steps <= 8'
limit "--max-steps: 16 blocks" 400 '{"prompt": "hi", "max_tokens": 16, "block_length": 1}' \
  '.error.param == "block_length" and (.error.message | test("at most 8 steps"))'
# Deep JSON nesting inside the body limit: a clear 400, not a crashed handler thread.
nest=$(printf '[%.0s' $(seq 1 1900))$(printf ']%.0s' $(seq 1 1900))
st=$(post $H "{\"messages\": $nest}")
check "deeply nested body: 400" [ "$st" = 400 ]
check "/health after the bad requests" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]
stop

# ---- concurrency: --max-running 1 --max-queue 1 ---------------------------------------------
# The embedded model, so that one long request runs for seconds (the golden test model finishes
# faster than the metrics below can be polled): 128 steps of full forwards over 136 tokens, ~5 s on
# a 2-core AVX2-only CPU (f32 matmuls). 480 steps took ~120 s per request there, two of them most
# of the TSan stage's 14 minutes; the dual cache is no way to shorten them, as it stops at the
# first block that ends the answer.
start_server "$BIN" -m "$SRC/models/tiny-llada.gguf" -t 1 --max-running 1 --max-queue 1
LONG='{"prompt": [1,2,3,4,5,6,7,8], "max_tokens": 128, "steps": 128}'
printf '%s' "$LONG" >"$TMP/long"
curl -s -o "$TMP/a" -w '%{http_code}' "$URL$C" --data-binary "@$TMP/long" >"$TMP/a.st" &
A=$!
for _ in $(seq 1 200); do [[ $(metric vllm:num_requests_running) == 1 ]] && break; sleep 0.05; done
curl -s -o "$TMP/b" -w '%{http_code}' "$URL$C" --data-binary "@$TMP/long" >"$TMP/b.st" &
B=$!
for _ in $(seq 1 200); do [[ $(metric vllm:num_requests_waiting) == 1 ]] && break; sleep 0.05; done
check "one running, one waiting" [ "$(metric vllm:num_requests_running)/$(metric vllm:num_requests_waiting)" = 1/1 ]
st=$(post $C "$LONG")
check "--max-running + --max-queue full: 429" [ "$st" = 429 ]
check "429 body is rate_limit_error" jqtest '.error.type == "rate_limit_error"'
wait $A $B
check "running and queued requests complete" [ "$(cat "$TMP/a.st")/$(cat "$TMP/b.st")" = 200/200 ]
stop

# ---- flood of distinct long prefixes against a 1 MiB prefix cache -----------------------------
# Each request declares a ~300-token prefix that no other request shares. --cache llm keeps K/V of
# every layer, about 0.5 MB per prefix on this model: without eviction 80 of them would hold
# ~40 MB. The cache must stay within its budget and the process must not grow with the flood.
start --cache llm --cache-budget-mb 1 --max-tokens-limit 4
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$PID/status"; }  # KiB
flood() {  # flood <first> <last>
  local i
  for i in $(seq "$1" "$2"); do
    local doc
    doc="Doc $i: $(printf 'w%d x%d ' $(seq $((i * 7)) $((i * 7 + 40))))"
    st=$(post $C "{\"prefix\": \"${doc:0:300}\", \"prompt\": \"Q$i?\", \"max_tokens\": 2, \"steps\": 1}")
    [[ $st == 200 ]] || { echo "FAIL flood request $i: $st $(head -c 200 "$TMP/body")"; fail=1; return; }
  done
}
budget=$(metric bicache_cache_budget_bytes)
flood 1 1
entry=$(metric bicache_cache_bytes)
flood 2 20
rss0=$(rss)
max_used=0
for round in 1 2 3 4 5 6; do
  flood $((round * 10 + 11)) $((round * 10 + 20))
  used=$(metric bicache_cache_bytes)
  (( used > max_used )) && max_used=$used
done
rss1=$(rss)
builds=$(metric bicache_prefix_builds_total)
evictions=$(metric bicache_cache_evictions_total)
echo "flood: budget $budget B, one prefix $entry B, $builds prefixes built, $evictions evicted," \
  "cache peak $max_used B; VmRSS $rss0 -> $rss1 KiB"
check "flood: a prefix is a real fraction of the budget" [ "$entry" -gt $((budget / 8)) ]
check "flood: cache bytes never over the budget" [ "$max_used" -le "$budget" ]
check "flood: every distinct prefix was built" [ "$builds" -ge 80 ]
check "flood: old prefixes were evicted" [ "$evictions" -ge $((builds - budget / entry - 1)) ]
# 60 prefixes after the first reading would add 60 x entry bytes if kept; allow a quarter of that.
# Sanitizer allocators hold freed memory in quarantine, so RSS says nothing there.
if [[ -n ${ASAN_OPTIONS:-}${TSAN_OPTIONS:-} ]]; then
  echo "skip flood: resident memory (sanitizer build: freed memory is quarantined)"
else
  check "flood: resident memory bounded (grew $(( rss1 - rss0 )) KiB)" \
    [ $(( (rss1 - rss0) * 1024 )) -lt $(( 60 * entry / 4 )) ]
fi
stop
exit $fail
