# Sourced by the server tests: starts `bicache serve` on a free loopback port and waits (bounded:
# at most 300 polls each for the listening line and /health 200). Sets TMP, PID and URL; the EXIT
# trap stops the server and removes TMP. Usage: start_server BIN [serve flags...]
# Also the shared assertions: check LABEL CMD... (prints ok/FAIL with the last response body in
# $TMP/body, sets fail=1), jqtest FILTER (jq on $TMP/body) and stop (SIGTERM, wait).
# SERVE_THREADS: the -t the tests give the server (2: the batch forwards run on both cores). The
# TSan stage sets BICACHE_TEST_THREADS=1: libgomp is not instrumented, so its worker threads must
# not start there (scripts/hardening.sh).
SERVE_THREADS=${BICACHE_TEST_THREADS:-2}
TMP=$(mktemp -d)
PID=
URL=
# On a failing exit the server's log is printed: a sanitizer report or a crash is then in the test's
# output instead of lost with $TMP.
cleanup() {
  local rc=$?
  [[ -n $PID ]] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  if [[ $rc != 0 && -s $TMP/log ]]; then
    echo "--- the last server's log (last 80 lines)"
    tail -n 80 "$TMP/log"
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

start_server() {
  local bin=$1
  shift
  # The background child opens the log itself, possibly after the first poll below: create it here.
  : >"$TMP/log"
  "$bin" serve --host 127.0.0.1 --port 0 "$@" >>"$TMP/log" 2>&1 &
  PID=$!
  for _ in $(seq 1 300); do
    URL=$(sed -n 's/^bicache: listening on \(http:[^ ]*\)$/\1/p' "$TMP/log")
    [[ -n $URL ]] && break
    sleep 0.1
  done
  [[ -n $URL ]] || { echo "FAIL: no listening line"; cat "$TMP/log"; exit 1; }
  for _ in $(seq 1 300); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "$URL/health") == 200 ]] && return 0
    sleep 0.1
  done
  echo "FAIL: /health never 200"
  exit 1
}

stop() { kill -TERM "$PID"; wait "$PID" || true; PID=; }

fail=0
check() {  # check <label> <cond...>
  local label=$1; shift
  if "$@"; then echo "ok   $label"; else echo "FAIL $label: $(head -c 400 "$TMP/body" 2>/dev/null)"; fail=1; fi
}
jqtest() { jq -e "$1" "$TMP/body" >/dev/null 2>&1; }
