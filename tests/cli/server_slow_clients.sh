#!/usr/bin/env bash
# `bicache serve` under slow and idle connections (issue 36, point 1; docs/hardening.md,
# "Connections"): 200 connections that send their head a byte at a time or sit idle do not keep
# /health or completions from being answered; the head and body deadlines answer 408; a
# Content-Length over the body limit is refused before the body (413); a kept-alive connection is
# closed after --idle-timeout; connections over --max-connections get 503 at once; SIGTERM with slow
# clients connected ends within --shutdown-grace + 1 s. Also the framing the front end reads itself:
# chunked bodies, "Expect: 100-continue", pipelined requests. Bounded waits throughout.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
source "$(dirname "$0")/lib/serve.sh"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
BODY='{"prompt":"hi","max_tokens":4}'

# raw SECONDS PIECE...: sends each piece (escapes as in Python), pausing SECONDS after each, then
# reads until the server closes or 10 s pass; writes the last response body to $TMP/body and prints
# the status codes, space-separated ("none" if no answer). tests/cli/lib/raw_http.py.
raw() { "$PY" "$(dirname "$0")/lib/raw_http.py" "${URL#http://}" "$TMP/body" "$@"; }

# 150 slow heads + 50 idle keep-alive connections for 4 s (default deadlines: none of them is
# reached), while /health is probed and completions run. Every probe must be answered (within 5 s:
# the machine may be busy with other tests).
start_server "$BIN" -m "$M" -t "$SERVE_THREADS"
"$PY" "$SRC/scripts/connection_load.py" "$URL" --slow 150 --idle 50 --byte-interval 0.5 --ramp 1 \
  --seconds 4 --probe-rate 5 --probe-timeout 5 --completions >"$TMP/load"
cp "$TMP/load" "$TMP/body"
check "200 held connections: all /health probes answered" \
  jqtest '.probes_sent > 0 and .probes_answered == .probes_sent'
check "200 held connections: completions answered" \
  jqtest '.completions_sent > 0 and .completions_ok == .completions_sent'
check "200 held connections: they were held" jqtest '.held_min >= 190'
stop

start_server "$BIN" -m "$M" -t "$SERVE_THREADS" --header-timeout 2 --body-timeout 2 --idle-timeout 2 \
  --max-connections 400 --shutdown-grace 1

# Deadlines: the head and the body each have a total time, whatever the pace of the bytes.
st=$(raw 0.5 'GET /health HTTP/1.1\r\n' 'Ho' 'st' ': ' 'x' '\r' '\n' 'X-A: ' 'b')
check "slow head: 408" [ "$st" = 408 ]
check "slow head: names --header-timeout" \
  jqtest '.error.code == "request_timeout" and (.error.message | test("--header-timeout"))'
st=$(raw 0.5 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{' '"' 'p' 'r' 'o' 'm')
check "slow body: 408" [ "$st" = 408 ]
check "slow body: names --body-timeout" jqtest '.error.message | test("--body-timeout")'
st=$(raw 0 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n')
check "Content-Length over the limit: 413 before any body" [ "$st" = 413 ]
check "Content-Length over the limit: says the limit" jqtest '.error.message | test("too large")'
curl -s "$URL/metrics" >"$TMP/body"
check "/metrics counts the two 408s" grep -q '^bicache_connections_timed_out_total{.*} 2$' "$TMP/body"
line=$(head -c 7000 /dev/zero | tr '\0' a)
st=$(raw 0 "GET /health HTTP/1.1\\r\\nHost: x\\r\\n$(for i in $(seq 1 10); do printf 'X-%d: %s\\r\\n' "$i" "$line"; done)\\r\\n")
check "head over 64 KiB: 431" [ "$st" = 431 ]
# A kept-alive connection: two requests answered, then closed by the server after --idle-timeout
# (raw reads until the server closes: without that it would report after its own 10 s).
t0=$(date +%s)
st=$(raw 0.1 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n' 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n')
t1=$(date +%s)
check "keep-alive: two requests on one connection" [ "$st" = "200 200" ]
check "keep-alive: closed when idle ($((t1 - t0)) s)" [ $((t1 - t0)) -lt 8 ]
# Pipelined requests, a chunked body, and a body curl sends after "Expect: 100-continue".
st=$(raw 0 'GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
check "pipelined: both answered" [ "$st" = "200 200" ]
st=$(raw 0 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n' \
  "$(printf '%x' ${#BODY})\\r\\n$BODY\\r\\n0\\r\\n\\r\\n")
check "chunked body: 200" [ "$st" = 200 ]
pad=$(head -c 2000 /dev/zero | tr '\0' ' ')
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d "{\"prompt\":\"hi\",\"max_tokens\":4$pad}" "$URL/v1/completions")
check "2 KB body (Expect: 100-continue): 200" [ "$st" = 200 ]

# Shutdown with slow clients connected: gone within grace + 1 s, exit 0.
"$PY" "$SRC/scripts/connection_load.py" "$URL" --slow 50 --idle 20 --byte-interval 0.5 --ramp 1 \
  --seconds 10 --probe-rate 1 >/dev/null 2>&1 &
LOAD=$!
sleep 2
t0=$(date +%s%N)
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kill "$LOAD" 2>/dev/null || true
wait "$LOAD" 2>/dev/null || true
cp "$TMP/log" "$TMP/body"
check "slow clients at SIGTERM: exit 0" [ "$rc" = 0 ]
check "slow clients at SIGTERM: gone within grace + 1 s (took $ms ms)" [ "$ms" -lt 4000 ]

# The connection cap: over it, 503 at once and closed; under it again, served.
start_server "$BIN" -m "$M" -t "$SERVE_THREADS" --max-connections 4
"$PY" - "${URL#http://}" <<'PY' &
import socket, sys, time
host, port = sys.argv[1].split(":")
held = [socket.create_connection((host, int(port))) for _ in range(4)]
time.sleep(3)
PY
HOLD=$!
sleep 1
st=$(curl -s -m 5 -o "$TMP/body" -w '%{http_code}' "$URL/health")
check "over --max-connections: 503" [ "$st" = 503 ]
check "over --max-connections: says so" \
  jqtest '.error.code == "too_many_connections" and (.error.message | test("--max-connections"))'
wait "$HOLD"
sleep 0.3
check "under the cap again: 200" [ "$(curl -s -m 5 -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]
curl -s "$URL/metrics" >"$TMP/body"
check "/metrics counts the refused connection" grep -q '^bicache_connections_refused_total{.*} 1$' "$TMP/body"
check "/metrics: only its own connection open" grep -q '^bicache_connections_open{.*} 1$' "$TMP/body"
stop
exit $fail
