// `bicache bench-forward`'s output: the text tables and the JSON document of a run of
// MeasureForward (harness/forward_bench.h) over several token counts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "harness/forward_bench.h"
#include "model/config.h"
#include "model/weights.h"

namespace bicache::harness {

// What the report says about the run besides its rows.
struct ForwardBenchSetup {
  std::string model_path;  // empty: the synthetic model
  model::ModelConfig config;
  std::string tensor_types;  // TensorTypeSummary of the file
  uint64_t file_bytes = 0;
  uint64_t rss_after_load = 0;  // resident bytes when described (0 when unknown)
  double load_seconds = 0;
  int threads = 0;  // OpenMP team size the forwards run with
  int repeats = 0, gemm_iters = 0;
  bool breakdown = true;
  std::string matmul_precision;  // the GEMM yardstick's ("bf16" or "f32")
  std::string int_isa;           // the integer routes' instruction set (kernels::ActiveIntIsa)
  uint64_t weight_bytes = 0;     // ForwardWeightBytes: what one forward reads at least
  double read_bytes_per_s = 0;   // MeasureReadBandwidth with the forwards' threads
  // weight_bytes / read_bytes_per_s in ms: no forward can beat it (ForwardBenchRow::bound_ms).
  double BoundMs() const;
};

// The setup of a run on `m`, read right after loading it (resident memory, threads, precision).
ForwardBenchSetup DescribeForwardBench(const model::Model& m, const std::string& model_path,
                                       double load_seconds, int repeats, int gemm_iters,
                                       bool breakdown);

// "Q4_K x 14, Q6_K x 3, F32 x 9": the storage types of the model's tensors, most frequent first.
std::string TensorTypeSummary(const format::GgufFile& f);

// The largest VmHWM of the rows: load plus the forwards, before any GEMM yardstick.
uint64_t PeakRss(const std::vector<ForwardBenchRow>& rows);

// On stdout: the model and settings, then the table's column heads (before any row is measured).
void PrintForwardBenchHeader(const ForwardBenchSetup& setup);
// One table row, flushed (rows are printed as they are measured).
void PrintForwardBenchRow(const ForwardBenchRow& r);
// After the table: peak memory and, with setup.breakdown, where the time goes.
void PrintForwardBenchSummary(const ForwardBenchSetup& setup,
                              const std::vector<ForwardBenchRow>& rows);

// One entry of the --json "results" array.
nlohmann::json ForwardBenchRowJson(const ForwardBenchRow& r, bool breakdown);
// The --json document: model, settings and results.
nlohmann::json ForwardBenchJson(const ForwardBenchSetup& setup,
                                const std::vector<ForwardBenchRow>& rows);

}  // namespace bicache::harness
