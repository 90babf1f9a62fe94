#!/usr/bin/env bash
# Hardening checks (docs/hardening.md), run by `make test` after the ordinary test suite:
#   asan  - AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan/), the whole ctest suite
#   tsan  - ThreadSanitizer build (build-tsan/), the concurrency tests: scheduler, prefix store and
#           tree, engine batching, the HTTP connection layer and the server CLI tests
#   fuzz  - libFuzzer build (build-fuzz/), each target for FUZZ_SECONDS (default 60) from its seed
#           corpus; new inputs go to a scratch folder, crashes to build-fuzz/artifacts/
# Usage: scripts/hardening.sh [asan] [tsan] [fuzz]     (no argument: all three, in that order)
# Env:   FUZZ_SECONDS (per target), JOBS (build and ctest parallelism, default nproc),
#        FUZZ_ONLY="t1 t2" (fuzz only these targets), HARDENING_SKIP=1 (skip everything, e.g. for
#        a quick local `make test`).
# Any sanitizer report, crash or failing test makes the script exit non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
STAGES=("$@")
[[ ${#STAGES[@]} -eq 0 ]] && STAGES=(asan tsan fuzz)
if [[ ${HARDENING_SKIP:-0} == 1 ]]; then
  echo "hardening: skipped (HARDENING_SKIP=1)"
  exit 0
fi
command -v clang++ >/dev/null || { echo "hardening: clang++ is missing (scripts/deps.sh installs it)" >&2; exit 1; }

# Sanitizer settings shared by every stage: fail hard, with stacks, on the first report.
export ASAN_OPTIONS="abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/scripts/tsan.supp"
# Test processes run side by side; one OpenMP thread each (as `make test` does).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

declare -A SECONDS_TAKEN
configure() {  # configure DIR FLAGS...
  local dir=$1; shift
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
}

stage_asan() {
  configure build-asan -DBICACHE_SANITIZE=ON
  cmake --build build-asan -j "$JOBS"
  (cd build-asan && ctest --output-on-failure -j "$JOBS")
}

# ThreadSanitizer: the tests that run threads against each other. OpenMP (libgomp) and oneDNN
# are not instrumented; with OMP_NUM_THREADS=1 libgomp starts no worker threads, so TSan sees
# only our threads. scripts/tsan.supp lists uninstrumented libraries only, never our code.
TSAN_TESTS='ServerHttp|SchedulerTest|PrefixBuildTest|PrefixStore|PrefixTree|RecentPrefix|MemoryBudget|EngineModesTest|cli\.server_'
stage_tsan() {
  configure build-tsan -DBICACHE_TSAN=ON
  cmake --build build-tsan -j "$JOBS" --target bicache bicache_tests
  # BICACHE_TEST_THREADS=1: the server tests pass it as -t, which the scheduler's worker applies.
  (cd build-tsan && OMP_NUM_THREADS=1 BICACHE_TEST_THREADS=1 ctest --output-on-failure -j "$JOBS" -R "$TSAN_TESTS")
}

FUZZ_TARGETS=(${FUZZ_ONLY:-gguf_bytes gguf_structured tokenizer api_request chat http_request})
stage_fuzz() {
  configure build-fuzz -DBICACHE_FUZZ=ON
  cmake --build build-fuzz -j "$JOBS" --target bicache_fuzzers
  mkdir -p build-fuzz/artifacts
  local t scratch extra max_len rc=0
  for t in "${FUZZ_TARGETS[@]}"; do
    scratch=$(mktemp -d)
    extra=()
    max_len=8192
    case $t in
      gguf_bytes) extra=("$ROOT/tests/data/gguf_bad"); max_len=65536 ;;
      gguf_structured) max_len=1024 ;;
      api_request) max_len=65536 ;;  # deep-nesting bodies need room
    esac
    echo "== fuzz $t: ${FUZZ_SECONDS}s"
    # The first folder receives new inputs (scratch, thrown away); the others are read-only seeds.
    if ! build-fuzz/fuzz/fuzz_$t -max_total_time="$FUZZ_SECONDS" -max_len="$max_len" -timeout=20 \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" \
        "$scratch" "fuzz/corpus/$t" "${extra[@]}" > "build-fuzz/fuzz_$t.log" 2>&1; then
      echo "FAIL fuzz $t (log: build-fuzz/fuzz_$t.log; crash input under build-fuzz/artifacts/)"
      tail -40 "build-fuzz/fuzz_$t.log"
      rc=1
    else
      grep -E '^stat::number_of_executed_units|^Done ' "build-fuzz/fuzz_$t.log" | tr '\n' ' '
      echo
    fi
    rm -rf "$scratch"
  done
  return $rc
}

status=0
for s in "${STAGES[@]}"; do
  start=$(date +%s)
  echo "==== hardening: $s"
  if "stage_$s"; then result=ok; else result=FAILED; status=1; fi
  SECONDS_TAKEN[$s]=$(( $(date +%s) - start ))
  echo "==== hardening: $s $result in ${SECONDS_TAKEN[$s]}s"
done
for s in "${STAGES[@]}"; do echo "hardening: $s ${SECONDS_TAKEN[$s]}s"; done
exit $status
