#!/usr/bin/env bash
# A non-streaming client that gives up mid-generation: its request is cancelled (the HTTP server
# watches its socket while the request is handled), which frees its batch slot and cache pin
# long before the generation would have ended. Checks /metrics: nothing running, nothing pinned,
# one cancellation, no finished request. Every wait is bounded in count.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/models/tiny-llada.gguf  # the embedded model: a 400-token request runs for seconds
source "$(dirname "$0")/lib/serve.sh"
metric() { sed -n "s/^$1{[^}]*} //p" "$TMP/metrics"; }

start_server "$BIN" -m "$M" -t 1 --max-tokens-limit 1024 --max-steps 4096
# A long request: a shared system prefix (so it holds a cache pin) and a 900-token canvas (about
# 30 s alone on one core with the embedded model; the client leaves after 3 s).
cat >"$TMP/long.json" <<'JSON'
{"messages":[{"role":"system","content":"A long shared document that every request reads first."},
 {"role":"user","content":"Summarise it."}],"max_tokens":900,"steps":900,"block_length":900,"cache":"llm"}
JSON
# A short probe first, so the model is warm and the prefix entry exists.
cat >"$TMP/probe.json" <<'JSON'
{"messages":[{"role":"system","content":"A long shared document that every request reads first."},
 {"role":"user","content":"Summarise it."}],"max_tokens":8,"cache":"llm"}
JSON
check "probe: 200" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/chat/completions" --data-binary "@$TMP/probe.json")" = 200 ]

# The client gives up after 3 s (curl closes the socket); the request would run much longer.
curl -s --max-time 3 -o /dev/null "$URL/v1/chat/completions" --data-binary "@$TMP/long.json" &
CURL=$!
seen=0
for _ in $(seq 1 25); do  # while the client waits: the request runs and pins its prefix
  curl -s -o "$TMP/metrics" "$URL/metrics"
  if [[ $(metric 'vllm:num_requests_running') == 1 && $(metric bicache_cache_pinned_bytes) != 0 ]]; then seen=1; break; fi
  sleep 0.1
done
check "while waiting: running, prefix pinned" [ "$seen" = 1 ]
wait "$CURL" || true
t2=$(date +%s%N)
running=; pinned=; cancelled=
for _ in $(seq 1 100); do
  curl -s -o "$TMP/metrics" "$URL/metrics"
  running=$(metric 'vllm:num_requests_running')
  pinned=$(metric bicache_cache_pinned_bytes)
  cancelled=$(metric bicache_requests_cancelled_total)
  [[ $running == 0 && $pinned == 0 && $cancelled == 1 ]] && break
  sleep 0.1
done
t3=$(date +%s%N)
echo "released $(( (t3 - t2) / 1000000 )) ms after the client left"
check "nothing running" [ "$running" = 0 ]
check "no pinned bytes" [ "$pinned" = 0 ]
check "cancellation counted" [ "$cancelled" = 1 ]
# A request that ran to its end would count as finished, not cancelled.
check "only the probe finished" [ "$(metric bicache_requests_finished_total)" = 1 ]
check "still serving" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/v1/chat/completions" \
  -d '{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}')" = 200 ]
exit $fail
