// `bicache bench-forward`'s measurement: forward-pass throughput of one model at one sequence
// length against the same run's oneDNN GEMM rate (cli/cmd_bench_forward.cpp says what is timed
// and how the ratios are read; harness/forward_bench_report.h prints and serialises the rows).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.h"

namespace bicache::harness {

struct ForwardBenchRow {
  int tokens = 0, logit_rows = 0;
  double ms_median = 0, ms_best = 0;
  double matmul_gflop = 0, attention_gflop = 0;
  double fwd_gflops = 0, gemm_gflops = 0;  // median forward, median yardstick run
  double fwd_gflops_best = 0,
         gemm_gflops_best = 0;  // best of each: less sensitive to a busy machine
  // breakdown (ms per forward, estimated from isolated runs at the forward's shapes)
  double ms_matmul = 0, ms_attention = 0, ms_other = 0;
  uint64_t peak_rss = 0;  // VmHWM after this length's forwards (load and earlier lengths included)
  double bound_ms = 0;    // the weights-read bound: ForwardWeightBytes / MeasureReadBandwidth
};

// One token count n: a warm-up forward, `repeats` timed forwards of one n-token sequence (logits
// for the last logit_rows_flag rows, every row when <= 0), the GEMM yardstick
// MeasureGemmGflops(n, d_ff, d_model) `repeats` times right after, and with `breakdown` the
// isolated matmul and attention timings. Error(kInvalidArgument) naming --tokens when n exceeds
// the model's context.
// Memory read bandwidth in bytes/s with every OpenMP thread: the best of `passes` sums over a
// 256 MiB buffer (well past any cache). The yardstick of the weights-read bound.
double MeasureReadBandwidth(int passes);

// Bytes one dense forward must read at least: every matrix of the file (2-D and larger tensors)
// but the token embedding, whose rows are gathered (it counts when it is also the output head).
// A mixture-of-experts model counts every expert.
uint64_t ForwardWeightBytes(const model::Model& m);

ForwardBenchRow MeasureForward(const model::Model& m, int n, int logit_rows_flag, int repeats,
                               int gemm_iters, bool breakdown);

}  // namespace bicache::harness
