// `bicache bench`: every cache mode on the same request stream, in one process, on the same depth
// table (the paper's comparison side by side). cli/cmd_bench.cpp turns flags into BenchOptions;
// harness/bench_report.h turns the BenchReport into the table, the JSON and the SVG.
//
// Fairness: each mode has its own Engine (own prefix store, same depth table) and the modes run
// interleaved request by request (request i under mode A, then B, ...), so machine noise and
// the background load hit every mode alike. One untimed warm-up request pays oneDNN's JIT first.
//
// The trade-off sweep (--depth-tables a.json,b.json): each extra table adds a mode served exactly
// like `bicache` but by an engine holding that table instead of the model's, so every table's
// point is paired with `none` on the same requests (harness/bench_report.h draws speed-up against
// delta accuracy per band).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "harness/bench_workload.h"
#include "harness/suite.h"

namespace bicache::harness {

// A depth table given with --depth-tables, loaded (and checked) before the model.
struct BenchDepthTable {
  std::string path;  // as given
  engine::DepthTable table;
};

// The mode name of a --depth-tables table: "bicache[answers 0.98]", "bicache[kv 0.998]" (the
// criterion, short, and the threshold with up to 6 significant digits).
std::string DepthTableModeName(const engine::DepthTable& table);

struct BenchOptions {
  std::string suite;                          // path, reported as given
  std::vector<engine::CacheMode> modes;       // distinct, in --modes order
  std::vector<BenchDepthTable> depth_tables;  // one `bicache` mode each, after `modes`
  WorkloadOptions workload;
  engine::RequestOptions base;  // sampler (stop ids filled in by RunBench) and refresh
  double cache_budget_mb = 0;
  int threads = 0;  // as given (reported only)
  // Called when the model has no depth table (with the path it was looked for at).
  std::function<void(const std::string&)> warn_no_depth_table;
};

struct BenchMode {
  std::string name;
  engine::CacheMode cache;
  // The table this mode was served with when it is not the model's (--depth-tables), else empty.
  std::string depth_table_path;
  engine::DepthTable depth_table;
  std::vector<engine::RequestResult> results;  // per workload request
  std::vector<bool> correct;                   // per workload request
  engine::EngineCacheStats cache_stats;        // after the run
};

// A plain GEMM of the model's FFN up-projection shape at the mean sequence length, measured after
// the run (same load, same threads): what the forwards' achieved GFLOP/s is compared to.
struct GemmReference {
  size_t m = 0, n = 0, k = 0;
  double gflops = 0;
};

struct BenchReport {
  BenchOptions options;
  std::string model_path, model_name, depth_table_path;
  int n_layer = 0;
  std::vector<SuiteSample> suite;
  std::vector<std::string> families;  // first-appearance order
  std::vector<double> ratios;         // per suite sample: prefix / (prompt + canvas), -1 unusable
  Workload workload;
  engine::DepthTable table;
  std::vector<BenchMode> modes;
  double wall_seconds = 0;
  GemmReference gemm;
};

// Loads the suite, builds the workload and runs it under every mode (progress on stderr).
BenchReport RunBench(BenchOptions options, const engine::LoadedModel& model);

}  // namespace bicache::harness
