#!/usr/bin/env bash
# Every malformed GGUF file (and a missing file, and a directory) is refused by `bicache info`
# with exit code 1 or 2 (never a crash/signal) and exactly one stderr line "bicache: ..." that
# says what is wrong.
set -euo pipefail
BIN=$1
SRC=$2
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

check_refused() {  # <path> <label>
  local path=$1 label=$2 rc=0
  "$BIN" info -m "$path" >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [[ $rc -ne 1 && $rc -ne 2 ]]; then
    echo "FAIL $label: exit code $rc (want 1 or 2)"; cat "$TMP/err"; return 1
  fi
  local lines
  lines=$(wc -l <"$TMP/err")
  if [[ $lines -ne 1 ]]; then
    echo "FAIL $label: $lines stderr lines (want 1):"; cat "$TMP/err"; return 1
  fi
  local line
  line=$(cat "$TMP/err")
  if [[ $line != "bicache: "* ]]; then
    echo "FAIL $label: stderr does not start with 'bicache: ': $line"; return 1
  fi
  # "bicache: <kind>: <message>": the message after the kind must say something.
  local msg=${line#bicache: }
  msg=${msg#*: }
  if [[ -z ${msg// /} || $msg == "$line" ]]; then
    echo "FAIL $label: no message after the prefix: $line"; return 1
  fi
  echo "ok   $label (exit $rc): $line"
}

fail=0
count=0
for f in "$SRC"/tests/data/gguf_bad/*.gguf; do
  name=$(basename "$f")
  count=$((count + 1))
  check_refused "$f" "$name" || fail=1
done
if [[ $count -eq 0 ]]; then echo "FAIL: no files in tests/data/gguf_bad"; exit 1; fi
check_refused "$TMP/does-not-exist.gguf" "missing file" || fail=1
mkdir "$TMP/adir.gguf"
check_refused "$TMP/adir.gguf" "directory" || fail=1
: >"$TMP/empty.gguf"
check_refused "$TMP/empty.gguf" "empty file" || fail=1
echo "checked $count malformed files"
exit $fail
