#!/usr/bin/env bash
# Clients that leave while their requests wait in the queue (behind one long running request):
# each queued request is cancelled where it is, never runs, and /metrics counts it, streamed or
# not, while the running request goes on. Then the long request's client leaves too and nothing is
# left running or pinned. Every wait is bounded in count; nothing asserts on wall time.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/models/tiny-llada.gguf  # the embedded model: a 900-token request runs for many seconds
source "$(dirname "$0")/lib/serve.sh"
metric() { sed -n "s/^$1{[^}]*} //p" "$TMP/metrics"; }
fetch_metrics() { curl -s -o "$TMP/metrics" "$URL/metrics"; }

start_server "$BIN" -m "$M" -t 1 --max-running 1 --max-tokens-limit 1024 --max-steps 4096
long='{"prompt":"A long story.","max_tokens":900,"steps":900,"block_length":900,"stream":true}'
curl -s -N -o /dev/null "$URL/v1/completions" -d "$long" &
LONG=$!
running=
for _ in $(seq 1 100); do
  fetch_metrics
  running=$(metric 'vllm:num_requests_running')
  [[ $running == 1 ]] && break
  sleep 0.1
done
check "the long request runs" [ "$running" = 1 ]

# Four clients queue behind it (two streamed, two not) and give up after a second.
short='{"prompt":"queued","max_tokens":8'
pids=()
for s in false true false true; do
  curl -s -N --max-time 1 -o /dev/null "$URL/v1/completions" -d "$short,\"stream\":$s}" &
  pids+=($!)
done
waiting=
for _ in $(seq 1 50); do
  fetch_metrics
  waiting=$(metric 'vllm:num_requests_waiting')
  [[ $waiting == 4 ]] && break
  sleep 0.05
done
check "four requests queued" [ "$waiting" = 4 ]
for p in "${pids[@]}"; do wait "$p" || true; done
cancelled=
for _ in $(seq 1 100); do
  fetch_metrics
  waiting=$(metric 'vllm:num_requests_waiting')
  cancelled=$(metric bicache_requests_cancelled_total)
  running=$(metric 'vllm:num_requests_running')
  [[ $waiting == 0 && $cancelled == 4 ]] && break
  sleep 0.1
done
check "queue emptied" [ "$waiting" = 0 ]
check "four cancellations counted" [ "$cancelled" = 4 ]
check "none of them ran" [ "$(metric bicache_requests_finished_total)" = 0 ]
check "the long request still runs" [ "$running" = 1 ]

kill "$LONG" 2>/dev/null || true
wait "$LONG" 2>/dev/null || true
for _ in $(seq 1 100); do
  fetch_metrics
  running=$(metric 'vllm:num_requests_running')
  cancelled=$(metric bicache_requests_cancelled_total)
  [[ $running == 0 && $cancelled == 5 ]] && break
  sleep 0.1
done
check "the long request cancelled too" [ "$cancelled" = 5 ]
check "nothing running" [ "$running" = 0 ]
check "nothing pinned" [ "$(metric bicache_cache_pinned_bytes)" = 0 ]
check "nothing finished" [ "$(metric bicache_requests_finished_total)" = 0 ]
exit $fail
