#!/usr/bin/env bash
# Bursts of concurrent connections (issue 45; docs/serving.md, "Bursts"): 32 and 64 completions,
# and 64 /health probes, each on a fresh connection at the same instant
# (scripts/burst_load.py), all answered 200 and none dropped by the listen queue (the kernel's
# TcpExtListenOverflows does not rise). Latency is measured there, not asserted here.
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
source "$(dirname "$0")/lib/serve.sh"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3

start_server "$BIN" -m "$M" -t "$SERVE_THREADS"
for run in "32" "64" "64 --health"; do
  # shellcheck disable=SC2086
  "$PY" "$SRC/scripts/burst_load.py" "$URL" --concurrency $run --rounds 1 >"$TMP/body"
  n=${run%% *}
  check "burst $run: $n requests sent" jqtest ".requests == $n"
  check "burst $run: none failed" jqtest '.failed == 0'
  check "burst $run: no listen-queue overflow" jqtest '.listen_overflows == 0'
done
exit $fail
