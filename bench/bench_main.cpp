// The single main() of the bicache_bench binary (CMake globs bench/*.cpp into one executable);
// benchmark files only register BENCHMARK(...)s.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
