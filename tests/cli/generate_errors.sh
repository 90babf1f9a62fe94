#!/usr/bin/env bash
# Invalid `bicache generate` requests are refused before any work, with a message naming the flag.
# Our own checks exit 2 ("bicache: invalid argument: ..."); CLI11's own parse errors (e.g. two
# mutually exclusive options) exit with CLI11's code (>= 100, < 128).
set -euo pipefail
BIN=$1
SRC=$2
M=$SRC/tests/data/golden/llada-tiny.gguf
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

# expect <label> <want-exit: 2 | cli11> <text the message must contain> -- args...
expect() {
  local label=$1 want=$2 needle=$3
  shift 4
  local rc=0
  "$BIN" generate -m "$M" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  local ok=1
  if [[ $want == 2 ]]; then
    [[ $rc -eq 2 ]] || ok=0
    grep -q '^bicache: ' "$TMP/err" || ok=0
  else
    [[ $rc -ge 100 && $rc -lt 128 ]] || ok=0  # CLI11 ExitCodes range, not a signal
  fi
  grep -qF -- "$needle" "$TMP/err" || ok=0
  if [[ $ok -eq 1 ]]; then
    echo "ok   $label (exit $rc): $(head -n1 "$TMP/err")"
  else
    echo "FAIL $label: exit $rc (want $want), stderr must contain '$needle':"; cat "$TMP/err"; fail=1
  fi
}

expect "block length not dividing gen length" 2 "--block-length" -- -p hi --gen-length 32 --block-length 5
expect "steps not a multiple of the blocks"   2 "--steps" -- -p hi --gen-length 32 --block-length 8 --steps 6
expect "zero steps"                           cli11 "--steps" -- -p hi --steps 0
expect "zero block length"                    cli11 "--block-length" -- -p hi --block-length 0
expect "negative seed"                        cli11 "--seed: must be a whole number from 0" -- -p hi --seed -1
expect "seed past 2^64-1"                     cli11 "got 18446744073709551616" -- -p hi --seed 18446744073709551616
expect "negative gen length"                  cli11 "--gen-length" -- -p hi --gen-length -4
expect "gen length past 2^20"                 cli11 "--gen-length" -- -p hi --gen-length 1048577
expect "negative refresh"                     cli11 "--refresh" -- -p hi --refresh -1
expect "negative cache budget"                cli11 "--cache-budget-mb" -- -p hi --cache-budget-mb -1
expect "unknown algorithm"                    2 "--algorithm" -- -p hi --algorithm bogus
expect "unknown cache mode"                   2 "--cache" -- -p hi --cache bogus
expect "negative fixed depth"                 2 "--cache" -- -p hi --cache fixed:-1
expect "threshold out of range"               2 "--threshold" -- -p hi --threshold 1.5
expect "neither -p nor --chat"                2 "--prompt" --
expect "--system without --chat"              2 "--system" -- -p hi --system sys
expect "both -p and --chat"                   cli11 "--chat" -- -p hi --chat hi
expect "non-numeric --steps"                  cli11 "--steps" -- -p hi --steps abc

# The flags generate shares with other commands have the same bounds there (cli/sampling_flags.h),
# checked at parse time: bench-serve's --max-tokens is now --gen-length (the old spelling still
# works), and its --steps/--block-length no longer take 0 for "default" (leave them out instead);
# bench and bench-serve share --prefixes (0 .. 1000, 0 = every group) and --per-prefix (1 .. 1000).
# expect_cmd <label> <text the CLI11 message must contain> -- command args...
# (expect_cmd2: the same for our own checks, exit 2)
expect_cmd() {
  local label=$1 needle=$2
  shift 3
  local rc=0
  "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [[ $rc -ge 100 && $rc -lt 128 ]] && grep -qF -- "$needle" "$TMP/err"; then
    echo "ok   $label (exit $rc): $(head -n1 "$TMP/err")"
  else
    echo "FAIL $label: exit $rc (want CLI11's), stderr must contain '$needle':"; cat "$TMP/err"; fail=1
  fi
}
expect_cmd2() {
  local label=$1 needle=$2
  shift 3
  local rc=0
  "$BIN" "$@" >"$TMP/out" 2>"$TMP/err" || rc=$?
  if [[ $rc -eq 2 ]] && grep -qF -- "$needle" "$TMP/err"; then
    echo "ok   $label (exit $rc): $(head -n1 "$TMP/err")"
  else
    echo "FAIL $label: exit $rc (want 2), stderr must contain '$needle':"; cat "$TMP/err"; fail=1
  fi
}
expect_cmd "bench-serve zero gen length"        "--gen-length" -- bench-serve -m "$M" --gen-length 0
expect_cmd "bench-serve --max-tokens is --gen-length" "--gen-length" -- bench-serve -m "$M" --max-tokens 0
expect_cmd "bench-serve zero steps"             "--steps" -- bench-serve -m "$M" --steps 0
expect_cmd "bench-serve zero block length"      "--block-length" -- bench-serve -m "$M" --block-length 0
expect_cmd "bench-serve negative seed"          "--seed: must be a whole number from 0" -- bench-serve -m "$M" --seed -1
expect_cmd "bench-serve negative cache budget"  "--cache-budget-mb" -- bench-serve -m "$M" --cache-budget-mb -1
expect_cmd "calibrate zero gen length"          "--gen-length" -- calibrate -m "$M" --gen-length 0
expect_cmd "eval negative refresh"              "--refresh" -- eval -m "$M" --refresh -1
expect_cmd "bench steps past 2^20"              "--steps" -- bench -m "$M" --steps 1048577
expect_cmd "bench zero per-prefix"              "--per-prefix" -- bench -m "$M" --per-prefix 0
expect_cmd "bench negative prefixes"            "--prefixes" -- bench -m "$M" --prefixes -1
expect_cmd "bench-serve prefixes past 1000"     "--prefixes" -- bench-serve -m "$M" --prefixes 1001
# --modes is read the same way by bench and bench-serve (cli/cache_flags.h): spaces ignored, an
# empty name, an unknown mode or one given twice (any spelling) refused before the model loads.
expect_cmd2 "bench-serve empty mode name"       "--modes 'none,,dual': empty mode name" -- bench-serve -m "$M" --modes none,,dual
expect_cmd2 "bench-serve mode given twice"      "--modes: 'fixed:2' given twice" -- bench-serve -m "$M" --modes "fixed:2, fixed:02"
expect_cmd2 "bench unknown mode"                "--modes: " -- bench -m "$M" --modes none,bogus
# bench-serve --prefixes 0 now means what it means for bench: every usable prefix group.
rc=0
"$BIN" bench-serve -m "$M" --clients 1 --requests 1 --rounds 1 --prefixes 0 --per-prefix 2 \
  --max-tokens 4 --modes none -t 1 >"$TMP/out" 2>"$TMP/err" || rc=$?
if [[ $rc -eq 0 ]] && grep -qE "[0-9]+ prefixes x 2" "$TMP/out"; then
  echo "ok   bench-serve --prefixes 0 takes every usable prefix group"
else
  echo "FAIL bench-serve --prefixes 0: exit $rc:"; cat "$TMP/out" "$TMP/err"; fail=1
fi

# A prompt longer than the golden model's 512-token context.
long=$(python3 -c "print('the quick brown fox jumps over the lazy dog ' * 200)")
expect "prompt longer than the context"       2 "context length" -- -p "$long"

# The matmul precision override (kernels/matmul.h): an unknown value is refused by name.
rc=0
BICACHE_MATMUL=fp8 "$BIN" generate -m "$M" -p hi >"$TMP/out" 2>"$TMP/err" || rc=$?
if [[ $rc -eq 2 ]] && grep -q "^bicache: .*BICACHE_MATMUL must be auto, bf16 or f32, got 'fp8'" "$TMP/err"; then
  echo "ok   unknown BICACHE_MATMUL (exit $rc): $(head -n1 "$TMP/err")"
else
  echo "FAIL unknown BICACHE_MATMUL: exit $rc (want 2):"; cat "$TMP/err"; fail=1
fi

# BICACHE_MATMUL=bf16 on a CPU without a oneDNN bf16 kernel (`info` says so) is refused by name;
# where the kernel exists it runs.
rc=0
BICACHE_MATMUL=bf16 "$BIN" generate -m "$M" -p hi >"$TMP/out" 2>"$TMP/err" || rc=$?
if "$BIN" info -m "$M" | grep -q 'no oneDNN bf16 matmul kernel'; then
  if [[ $rc -eq 2 ]] && grep -q "^bicache: .*BICACHE_MATMUL=bf16: oneDNN has no bf16 matmul kernel" "$TMP/err"; then
    echo "ok   BICACHE_MATMUL=bf16 without a bf16 kernel (exit $rc): $(head -n1 "$TMP/err")"
  else
    echo "FAIL BICACHE_MATMUL=bf16 without a bf16 kernel: exit $rc (want 2):"; cat "$TMP/err"; fail=1
  fi
elif [[ $rc -eq 0 ]]; then
  echo "ok   BICACHE_MATMUL=bf16 runs where the CPU has a bf16 kernel"
else
  echo "FAIL BICACHE_MATMUL=bf16 with a bf16 kernel: exit $rc:"; cat "$TMP/err"; fail=1
fi

# A mistyped command is named, with the list of commands (CLI11 alone says "A subcommand is required").
rc=0
"$BIN" genrate -p hi >"$TMP/out" 2>"$TMP/err" || rc=$?
if [[ $rc -ge 100 && $rc -lt 128 ]] && grep -q "unknown command 'genrate' (commands: .*generate" "$TMP/err"; then
  echo "ok   unknown command named (exit $rc)"
else
  echo "FAIL unknown command: exit $rc:"; cat "$TMP/err"; fail=1
fi

# --cache bicache on a model without a depth table runs at depth 0 and says so.
cp "$M" "$TMP/notable.gguf"
"$BIN" generate -m "$TMP/notable.gguf" -p hi --gen-length 4 --cache bicache >"$TMP/out" 2>"$TMP/err"
if grep -q "warning: no depth table at $TMP/notable.gguf.depth.json" "$TMP/err"; then
  echo "ok   --cache bicache without a depth table warns"
else
  echo "FAIL no depth-table warning:"; cat "$TMP/err"; fail=1
fi

# --depth-profile: an unknown name, a fast profile the model has no table for, a table of another
# model: one clear error each, before any work.
expect "unknown depth profile" 2 "--depth-profile 'fastest': neither a profile (safe, fast) nor a depth table file" -- \
  -p hi --gen-length 4 --cache bicache --depth-profile fastest
expect "no fast table" 2 "--depth-profile fast: this model has no fast table" -- \
  -p hi --gen-length 4 --cache bicache --depth-profile fast
printf '{"format": "bicache-depth-table/1", "threshold": 0.98, "n_layer": 5, "points": []}' >"$TMP/other.json"
expect "a table of another model" 2 "is for another model: it was made for 5 layers" -- \
  -p hi --gen-length 4 --cache bicache --depth-profile "$TMP/other.json"

exit $fail
