#include "harness/forward_bench_report.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "kernels/few_rows.h"
#include "kernels/matmul.h"
#include "util/proc_stats.h"

namespace bicache::harness {
namespace {

double Mb(uint64_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

}  // namespace

ForwardBenchSetup DescribeForwardBench(const model::Model& m, const std::string& model_path,
                                       double load_seconds, int repeats, int gemm_iters,
                                       bool breakdown) {
  ForwardBenchSetup s;
  s.model_path = model_path;
  s.config = m.config();
  s.tensor_types = TensorTypeSummary(m.file());
  s.file_bytes = m.file().file_size();
  s.rss_after_load = CurrentRssBytes().value_or(0);
  s.load_seconds = load_seconds;
  s.threads = omp_get_max_threads();
  s.repeats = repeats;
  s.gemm_iters = gemm_iters;
  s.breakdown = breakdown;
  s.matmul_precision = kernels::MatmulPrecisionName(kernels::ActiveMatmulPrecision());
  s.int_isa = kernels::IntIsaName(kernels::ActiveIntIsa());
  s.weight_bytes = ForwardWeightBytes(m);
  s.read_bytes_per_s = MeasureReadBandwidth(5);
  return s;
}

double ForwardBenchSetup::BoundMs() const {
  return read_bytes_per_s > 0 ? static_cast<double>(weight_bytes) / read_bytes_per_s * 1e3 : 0;
}

std::string TensorTypeSummary(const format::GgufFile& f) {
  std::map<std::string, int> count;
  for (const auto& t : f.tensors()) ++count[format::TensorTypeName(t.type)];
  std::vector<std::pair<int, std::string>> v;
  for (const auto& [name, n] : count) v.emplace_back(-n, name);
  std::sort(v.begin(), v.end());
  std::string s;
  for (const auto& [n, name] : v) s += (s.empty() ? "" : ", ") + name + " x " + std::to_string(-n);
  return s;
}

uint64_t PeakRss(const std::vector<ForwardBenchRow>& rows) {
  uint64_t peak = 0;
  for (const ForwardBenchRow& r : rows) peak = std::max(peak, r.peak_rss);
  return peak;
}

void PrintForwardBenchHeader(const ForwardBenchSetup& s) {
  const model::ModelConfig& c = s.config;
  std::printf(
      "model %s: %s, %d layers, d %d, %d heads x %d (%d kv), d_ff %d, vocab %d; built/loaded in "
      "%.1f s\n",
      s.model_path.empty() ? "(synthetic)" : s.model_path.c_str(), model::ArchName(c.arch),
      c.n_layer, c.d_model, c.n_head, c.head_dim, c.n_kv_head, c.d_ff, c.n_vocab, s.load_seconds);
  if (c.is_moe()) {
    std::printf(
        "mixture of experts: %d experts, top %d, expert ff %d (d_ff above = top x expert ff); "
        "FLOPs "
        "and GFLOP/s count ACTIVE parameters only (router + the chosen experts per token)\n",
        c.n_expert, c.n_expert_used, c.d_ff_exp);
  }
  std::printf("tensor types: %s; file %.1f MB, resident after load %.1f MB\n",
              s.tensor_types.c_str(), Mb(s.file_bytes), Mb(s.rss_after_load));
  std::printf(
      "threads %d, repeats %d (median; best ratio = best forward / best GEMM run), GEMM "
      "yardstick: oneDNN "
      "%s [n x %d] * [%d x %d], %d iters per run\n\n",
      s.threads, s.repeats, s.matmul_precision.c_str(), c.d_model, c.d_model, c.d_ff, s.gemm_iters);
  std::printf(
      "integer routes: %s; weights-read bound: %.1f MB of matrices / %.1f GB/s read bandwidth "
      "(measured, %d threads) = %.1f ms per forward\n\n",
      s.int_isa.c_str(), Mb(s.weight_bytes), s.read_bytes_per_s / 1e9, s.threads, s.BoundMs());
  std::printf("%7s %7s %9s %9s %9s %9s %9s %9s %6s %10s %9s %8s\n", "tokens", "logits", "ms/fwd",
              "best ms", "mm GFLOP", "att GFLOP", "fwd GF/s", "GEMM GF/s", "ratio", "best ratio",
              "bound ms", "x bound");
}

void PrintForwardBenchRow(const ForwardBenchRow& r) {
  std::printf("%7d %7d %9.1f %9.1f %9.2f %9.2f %9.1f %9.1f %6.2f %10.2f %9.1f %8.2f\n", r.tokens,
              r.logit_rows, r.ms_median, r.ms_best, r.matmul_gflop, r.attention_gflop, r.fwd_gflops,
              r.gemm_gflops, r.fwd_gflops / r.gemm_gflops, r.fwd_gflops_best / r.gemm_gflops_best,
              r.bound_ms, r.bound_ms > 0 ? r.ms_median / r.bound_ms : 0.0);
  std::fflush(stdout);
}

void PrintForwardBenchSummary(const ForwardBenchSetup& s,
                              const std::vector<ForwardBenchRow>& rows) {
  const uint64_t peak_rss = PeakRss(rows);
  std::printf(
      "\npeak resident memory (VmHWM, load + the forwards above): %.1f MB = %.2f x the file's "
      "%.1f MB\n",
      Mb(peak_rss), static_cast<double>(peak_rss) / static_cast<double>(s.file_bytes),
      Mb(s.file_bytes));
  if (!s.breakdown) return;
  std::printf(
      "\nwhere the time goes (ms per forward; matmul and attention timed alone at the same "
      "shapes)\n");
  std::printf("%7s %10s %10s %10s %10s %12s\n", "tokens", "forward", "matmul", "attention", "other",
              "matmul GF/s");
  for (const ForwardBenchRow& r : rows) {
    std::printf("%7d %10.1f %10.1f %10.1f %10.1f %12.1f\n", r.tokens, r.ms_median, r.ms_matmul,
                r.ms_attention, r.ms_other, r.matmul_gflop / r.ms_matmul * 1e3);
  }
}

nlohmann::json ForwardBenchRowJson(const ForwardBenchRow& r, bool breakdown) {
  nlohmann::json e = {{"tokens", r.tokens},
                      {"logit_rows", r.logit_rows},
                      {"ms_per_forward", r.ms_median},
                      {"ms_best", r.ms_best},
                      {"matmul_gflop", r.matmul_gflop},
                      {"attention_gflop", r.attention_gflop},
                      {"forward_gflops", r.fwd_gflops},
                      {"gemm_gflops", r.gemm_gflops},
                      {"ratio", r.fwd_gflops / r.gemm_gflops},
                      {"forward_gflops_best", r.fwd_gflops_best},
                      {"gemm_gflops_best", r.gemm_gflops_best},
                      {"ratio_best", r.fwd_gflops_best / r.gemm_gflops_best},
                      {"bound_ms", r.bound_ms},
                      {"ratio_to_bound", r.bound_ms > 0 ? r.ms_median / r.bound_ms : 0.0}};
  if (breakdown) {
    e["breakdown_ms"] = {
        {"matmul", r.ms_matmul}, {"attention", r.ms_attention}, {"other", r.ms_other}};
  }
  return e;
}

nlohmann::json ForwardBenchJson(const ForwardBenchSetup& s,
                                const std::vector<ForwardBenchRow>& rows) {
  const model::ModelConfig& c = s.config;
  nlohmann::json j;
  j["model"] = {{"file", s.model_path.empty() ? "synthetic" : s.model_path},
                {"arch", model::ArchName(c.arch)},
                {"n_layer", c.n_layer},
                {"d_model", c.d_model},
                {"n_head", c.n_head},
                {"n_kv_head", c.n_kv_head},
                {"head_dim", c.head_dim},
                {"d_ff", c.d_ff},
                {"n_vocab", c.n_vocab},
                {"n_expert", c.n_expert},
                {"n_expert_used", c.n_expert_used},
                {"d_ff_exp", c.d_ff_exp}};
  j["threads"] = s.threads;
  j["tensor_types"] = s.tensor_types;
  j["file_bytes"] = s.file_bytes;
  j["peak_rss_bytes"] = PeakRss(rows);
  j["repeats"] = s.repeats;
  j["gemm_iters"] = s.gemm_iters;
  j["matmul_precision"] = s.matmul_precision;
  j["int_isa"] = s.int_isa;
  j["weight_bytes"] = s.weight_bytes;
  j["read_bytes_per_s"] = s.read_bytes_per_s;
  for (const ForwardBenchRow& r : rows) j["results"].push_back(ForwardBenchRowJson(r, s.breakdown));
  return j;
}

}  // namespace bicache::harness
