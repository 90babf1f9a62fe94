// `bicache bench-serve`'s output. Definitions (also in docs/benchmarks.md, "Serving load"):
//   tokens/s       = canvas tokens (max_tokens per request; every canvas position is denoised,
//                    as in `bicache bench`) of successful requests / summed turn wall seconds
//   answer tok/s   = usage.completion_tokens (before the stop token) / the same seconds
//   latency        = client-side wall time of one request (queueing included); p50 / p99 nearest
//                    rank
//   prefix hit     = vllm:gpu_prefix_cache_hits_total / queries_total over the mode's turns (prompt
//                    tokens served from a cached prefix); request hit = share of responses with
//                    bicache.hit (their prefix entry was found, not built)
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/bench_serve.h"

namespace bicache::harness {

// Nearest-rank percentile (p in [0, 100]); 0 for no values.
double Percentile(std::vector<double> v, double p);
// Sum of the samples of `name` (any labels) in Prometheus text.
double PrometheusSum(const std::string& text, const std::string& name);

// The --json document; "errors" is the failed requests over all modes.
nlohmann::json BenchServeJson(const BenchServeReport& report);
// The table on stdout; `doc` is BenchServeJson(report).
void PrintBenchServeText(const BenchServeReport& report, const nlohmann::json& doc);

}  // namespace bicache::harness
