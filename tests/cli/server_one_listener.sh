#!/usr/bin/env bash
# `bicache serve` has one listener (issue 45; docs/serving.md, "Connections"): the public TCP port,
# and no Unix-domain or other socket that a local user could reach; the answers the HTTP layer and
# the route table give themselves (POST to a GET route: 405 with Allow; a POST without a body or
# Content-Length: a message saying so); a request sent on an idle kept-alive connection right after
# SIGTERM gets 503, not a silent close; requests running or queued at SIGTERM, streamed or not,
# complete within the grace.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
source "$(dirname "$0")/lib/serve.sh"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

start_server "$BIN" -m "$M" -t "$SERVE_THREADS" --shutdown-grace 2
port=${URL##*:}

# Listeners of this process: TCP ones, then Unix-domain ones.
ss -Hltnp >"$TMP/tcp"
grep "pid=$PID," "$TMP/tcp" >"$TMP/body" || true
check "one TCP listener" [ "$(wc -l <"$TMP/body")" = 1 ]
check "it is the public port" grep -q ":$port " "$TMP/body"
ss -Hlxp | grep "pid=$PID," >"$TMP/body" || true
check "no Unix-domain listener" [ ! -s "$TMP/body" ]
ss -Hlup | grep "pid=$PID," >"$TMP/body" || true
check "no UDP socket" [ ! -s "$TMP/body" ]

# Messages the HTTP layer and the route table give.
st=$(curl -s -o "$TMP/body" -D "$TMP/head" -w '%{http_code}' -X POST "$URL/health")
check "POST /health: 405" [ "$st" = 405 ]
check "POST /health: Allow names GET" grep -qi '^Allow: GET' "$TMP/head"
check "POST /health: says what is allowed" jqtest '.error.message | test("allowed: GET")'
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$URL/v1/completions")
check "POST without a body or Content-Length: 400" [ "$st" = 400 ]
check "POST without a body: says so" jqtest '.error.message | test("no body.*Content-Length")'

# SIGTERM while a kept-alive connection is idle: a request sent on it 50 ms later gets 503.
"$PY" - "$port" "$PID" >"$TMP/body" <<'EOF'
import os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
def response():
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(65536)
        if not d:
            return got
        got += d
    head, _, body = got.partition(b"\r\n\r\n")
    n = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0])
    while len(body) < n:
        d = s.recv(65536)
        if not d:
            break
        body += d
    return head + b"\r\n\r\n" + body
s.sendall(req)
first = response()
os.kill(pid, signal.SIGTERM)
time.sleep(0.05)
try:
    s.sendall(req)
    second = response()
except OSError as e:
    second = repr(e).encode()
print(first.split(b"\r\n")[0].decode(), "|", second.split(b"\r\n")[0].decode(errors="replace"))
print(second.decode(errors="replace"))
EOF
check "idle keep-alive before SIGTERM: 200" grep -q '^HTTP/1.1 200 .*|' "$TMP/body"
check "idle keep-alive right after SIGTERM: 503" grep -q '| HTTP/1.1 503' "$TMP/body"
check "idle keep-alive right after SIGTERM: says why" grep -q 'shutting down' "$TMP/body"
t0=$(date +%s%N)
wait "$PID" && rc=0 || rc=$?
PID=
t1=$(date +%s%N)
echo "exit $rc after $(((t1 - t0) / 1000000)) ms" >"$TMP/body"
check "exit 0 after SIGTERM" [ "$rc" = 0 ]
check "exit within grace + 1 s" [ $(((t1 - t0) / 1000000)) -lt 3000 ]

# SIGTERM while requests run and wait (one at a time, ~0.4 s each here): every request sent before
# the signal, streamed or not, gets its grace and completes.
start_server "$BIN" -m "$M" -t "$SERVE_THREADS" --max-running 1 --shutdown-grace 30
for i in 1 2 3; do
  curl -s -o "$TMP/s$i" -w '%{http_code}' "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"hi","max_tokens":128,"stream":true}' >"$TMP/s$i.code" &
  curl -s -o "$TMP/p$i" -w '%{http_code}' "$URL/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt":"hi","max_tokens":128,"steps":128}' >"$TMP/p$i.code" &
done
sleep 0.3
curl -s "$URL/metrics" >"$TMP/metrics"
kill -TERM "$PID"
wait "$PID" && rc=0 || rc=$?
PID=
wait
grep -h '^vllm:num_requests_\(running\|waiting\)' "$TMP/metrics" >"$TMP/body" || true
echo "at the signal: $(tr '\n' ' ' <"$TMP/body")"
for i in 1 2 3; do
  cp "$TMP/s$i" "$TMP/body" 2>/dev/null || : >"$TMP/body"  # curl writes no file for no body
  check "stream $i sent before SIGTERM: 200" [ "$(cat "$TMP/s$i.code")" = 200 ]
  check "stream $i sent before SIGTERM: completes" grep -q 'data: \[DONE\]' "$TMP/s$i"
  cp "$TMP/p$i" "$TMP/body" 2>/dev/null || : >"$TMP/body"
  check "request $i sent before SIGTERM: 200" [ "$(cat "$TMP/p$i.code")" = 200 ]
done
check "exit 0 after the grace" [ "$rc" = 0 ]

exit $fail
