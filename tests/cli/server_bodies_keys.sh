#!/usr/bin/env bash
# `bicache serve` at the edges of HTTP (issue: the server under hostile connections, points 3-6):
# bodies that cannot carry JSON get 415, not 500; a Content-Length that is not a number, an unknown
# method and an oversized header each get their own message; sampling values are quoted as sent;
# the API key from BICACHE_API_KEY or --api-key-file (and a warning for --api-key); --no-mmap
# serves a copy of the model that is then truncated on disk, --mlock starts, and SIGTERM ends the
# process within --shutdown-grace + 1 s while a client holds a half-sent request. Bounded waits.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
source "$(dirname "$0")/lib/serve.sh"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

start() { start_server "$BIN" -m "$M" -t "$SERVE_THREADS" "$@"; }
BODY='{"prompt":"hi","max_tokens":4}'
# raw REQUEST: sends bytes as they are (curl would fix them; the request must say "Connection:
# close"), writes the response body to $TMP/body and prints the status code (tests/cli/lib/raw_http.py).
raw() { "$PY" "$(dirname "$0")/lib/raw_http.py" "${URL#http://}" "$TMP/body" 0 "$1"; }

start
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -F prompt=hi "$URL/v1/completions")
check "multipart: 415" [ "$st" = 415 ]
check "multipart: says to send JSON" jqtest '.error.code == "unsupported_media_type" and (.error.message | test("application/json"))'
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -d prompt=hi -d max_tokens=4 "$URL/v1/completions")
check "form fields: 415" [ "$st" = 415 ]
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -d "$BODY" "$URL/v1/completions")
check "JSON sent with curl -d's form type: 200" [ "$st" = 200 ]
st=$(raw 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\nConnection: close\r\n\r\n')
check "Content-Length -1: 400" [ "$st" = 400 ]
check "Content-Length -1: named" jqtest '.error.message | test("Content-Length .-1. is not a byte count")'
st=$(raw 'FOO /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
check "unknown method: 501" [ "$st" = 501 ]
check "unknown method: named" jqtest '.error.message | test("unsupported HTTP method .FOO.")'
big=$(head -c 10240 /dev/zero | tr '\0' a)
st=$(raw "GET /health HTTP/1.1\\r\\nHost: x\\r\\nX-Big: $big\\r\\nConnection: close\\r\\n\\r\\n")
check "10 KiB header line: accepted (the head may take 64 KiB)" [ "$st" = 200 ]
big=$(head -c 70000 /dev/zero | tr '\0' a)
st=$(raw "GET /health HTTP/1.1\\r\\nHost: x\\r\\nX-Big: $big\\r\\nConnection: close\\r\\n\\r\\n")
check "70 KB head: 431" [ "$st" = 431 ]
check "70 KB head: says why" jqtest '.error.message | test("over 64 KiB")'
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"prompt":"hi","max_tokens":4,"top_p":1.0000001}' "$URL/v1/completions")
check "top_p 1.0000001: 400 quoting it" jqtest '.error.param == "top_p" and (.error.message | test("got 1.0000001"))'
curl -s -o "$TMP/body" -H 'Content-Type: application/json' -d '{"prompt":"hi","max_tokens":4,"eps":1e308}' "$URL/v1/completions"
check "eps 1e308: quoted as sent" jqtest '.error.param == "eps" and (.error.message | test("got 1e\\+308"))'
check "/health after all that: 200" [ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]
stop

# API key sources.
BICACHE_API_KEY=k3y start
check "BICACHE_API_KEY: no key 401" [ "$(curl -s -o "$TMP/body" -w '%{http_code}' -d "$BODY" "$URL/v1/completions")" = 401 ]
check "BICACHE_API_KEY: key 200" \
  [ "$(curl -s -o "$TMP/body" -w '%{http_code}' -H 'Authorization: Bearer k3y' -d "$BODY" "$URL/v1/completions")" = 200 ]
stop
printf 'f1lekey\n' >"$TMP/key"
start --api-key-file "$TMP/key"
check "--api-key-file: key 200" \
  [ "$(curl -s -o "$TMP/body" -w '%{http_code}' -H 'Authorization: Bearer f1lekey' -d "$BODY" "$URL/v1/completions")" = 200 ]
check "--api-key-file: no key 401" [ "$(curl -s -o "$TMP/body" -w '%{http_code}' -d "$BODY" "$URL/v1/completions")" = 401 ]
stop
start --api-key visible
cp "$TMP/log" "$TMP/body"
check "--api-key: warned about" grep -q "warning: --api-key is visible" "$TMP/log"
stop
rc=0
BICACHE_API_KEY=a timeout 60 "$BIN" serve -m "$M" --port 0 --api-key b >"$TMP/body" 2>&1 || rc=$?
check "two key sources: exit 2" [ "$rc" = 2 ]
check "two key sources: says so" grep -q "one way only" "$TMP/body"
rc=0
timeout 60 "$BIN" serve -m "$M" --port 0 --api-key-file "$TMP/none" >"$TMP/body" 2>&1 || rc=$?
check "missing key file: exit 2" [ "$rc" = 2 ]
check "missing key file: named" grep -q "cannot read --api-key-file" "$TMP/body"
# An empty key from any source is refused at start (exit 2, one sentence naming the source): it
# used to turn authentication off silently.
empty_key() {  # empty_key LABEL WHAT-THE-MESSAGE-NAMES ENV-ASSIGNMENTS... -- SERVE-ARGS...
  local label=$1 named=$2; shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  rc=0
  env "${envs[@]}" timeout 60 "$BIN" serve -m "$M" --port 0 "$@" >"$TMP/body" 2>&1 || rc=$?
  check "empty key ($label): exit 2" [ "$rc" = 2 ]
  check "empty key ($label): names $named" grep -q -- "$named.*empty" "$TMP/body"
}
empty_key "--api-key ''" "--api-key" -- --api-key ''
empty_key "--api-key blank" "--api-key" -- --api-key '  '
empty_key "BICACHE_API_KEY=" "BICACHE_API_KEY" BICACHE_API_KEY= --
empty_key "BICACHE_API_KEY blank" "BICACHE_API_KEY" "BICACHE_API_KEY= " --
empty_key "--api-key-file ''" "--api-key-file" -- --api-key-file ''
printf '\n' >"$TMP/blank-key"
empty_key "blank key file" "--api-key-file" -- --api-key-file "$TMP/blank-key"

# --no-mmap: the weights are read once, so truncating the file afterwards cannot reach the server.
cp "$M" "$TMP/model.gguf"
start_server "$BIN" -m "$TMP/model.gguf" -t "$SERVE_THREADS" --no-mmap
: >"$TMP/model.gguf"
st=$(curl -s -o "$TMP/body" -w '%{http_code}' -d "$BODY" "$URL/v1/completions")
check "--no-mmap: serves after the file was truncated" [ "$st" = 200 ]
stop
# Shutdown with a client that never finishes its request line: exits 0 within grace + 1 s (it used to
# wait for that connection for ever).
start --shutdown-grace 1
"$PY" - "${URL#http://}" <<'PY' &
import socket, sys, time
host, port = sys.argv[1].split(":")
s = socket.create_connection((host, int(port)))
end = time.time() + 15
for c in b"GET /health HTTP/1.1\r\nHost: slow\r\n":
    if time.time() > end:
        break
    try:
        s.send(bytes([c]))
    except OSError:
        break
    time.sleep(0.5)
PY
SLOW=$!
sleep 1
t0=$(date +%s%N)
kill -TERM "$PID"
rc=0
wait "$PID" || rc=$?
PID=
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
kill "$SLOW" 2>/dev/null || true
wait "$SLOW" 2>/dev/null || true
cp "$TMP/log" "$TMP/body"
check "slow client at SIGTERM: exit 0" [ "$rc" = 0 ]
check "slow client at SIGTERM: gone within grace + 1 s (took $ms ms)" [ "$ms" -lt 4000 ]
start --mlock
check "--mlock: serves" [ "$(curl -s -o "$TMP/body" -w '%{http_code}' -d "$BODY" "$URL/v1/completions")" = 200 ]
stop
exit $fail
