#include "harness/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "engine/engine_setup.h"
#include "kernels/matmul.h"
#include "util/error.h"

namespace bicache::harness {
namespace {

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The prompts' mean sequence length decides the reference GEMM's m.
GemmReference MeasureGemmReference(const BenchReport& report,
                                   const std::vector<engine::Prompt>& prompts,
                                   const model::ModelConfig& cfg) {
  const Workload& w = report.workload;
  const size_t N = w.requests.size();
  double mean_tokens = 0;
  for (size_t i = 0; i < N; ++i)
    mean_tokens +=
        prompts[w.requests[i].sample].tokens.size() + report.options.base.sampler.gen_length;
  mean_tokens /= std::max<size_t>(N, 1);
  GemmReference g;
  g.m = std::max<size_t>(1, static_cast<size_t>(mean_tokens + 0.5));
  g.n = cfg.d_ff, g.k = cfg.d_model;
  const double gemm_flop = 2.0 * g.m * g.n * g.k;
  const int iters = static_cast<int>(std::clamp(4e9 / gemm_flop, 3.0, 500.0));
  g.gflops = kernels::MeasureGemmGflops(g.m, g.n, g.k, iters);
  return g;
}

// One mode per --depth-tables table, after the --modes ones; a table for another model or
// whose name repeats an earlier mode's is refused before anything runs.
void AddTableModes(BenchReport& report, const BenchOptions& options,
                   const model::ModelConfig& config) {
  for (const BenchDepthTable& t : options.depth_tables) {
    try {
      engine::CheckTableForModel(t.table, config, t.path);
    } catch (const Error& e) {
      throw Error(ErrorKind::kInvalidArgument, std::string("--depth-tables: ") + e.what());
    }
    auto taken = [&](const std::string& name) {
      return std::any_of(report.modes.begin(), report.modes.end(),
                         [&](const BenchMode& o) { return o.name == name; });
    };
    for (const BenchMode& other : report.modes) {
      if (other.depth_table_path == t.path)
        throw Error(ErrorKind::kInvalidArgument, "--depth-tables: '" + t.path + "' given twice");
    }
    BenchMode m;
    m.cache.prefix = engine::PrefixReuse::kBicache;
    // Same criterion and threshold as an earlier table: the file name (or path) tells them apart.
    const std::string name = DepthTableModeName(t.table);
    m.name = name;
    if (taken(m.name)) m.name = name.substr(0, name.size() - 1) + " " + BaseName(t.path) + "]";
    if (taken(m.name)) m.name = name.substr(0, name.size() - 1) + " " + t.path + "]";
    m.depth_table_path = t.path;
    m.depth_table = t.table;
    report.modes.push_back(std::move(m));
  }
}

}  // namespace

std::string DepthTableModeName(const engine::DepthTable& table) {
  char threshold[32];
  std::snprintf(threshold, sizeof threshold, "%.6g", table.threshold());
  const char* criterion = table.criterion() == engine::DepthCriterion::kKvSimilarity
                              ? "kv"
                              : engine::DepthCriterionName(table.criterion());
  return std::string("bicache[") + criterion + " " + threshold + "]";
}

BenchReport RunBench(BenchOptions options, const engine::LoadedModel& lm) {
  BenchReport report;
  const auto& cfg = lm.model().config();
  engine::RequestOptions& base = options.base;
  base.sampler.stop_ids = lm.stop_ids();
  report.suite = LoadSuite(options.suite);
  report.families = Families(report.suite);
  const std::vector<SuiteSample>& suite = report.suite;

  // Prompts and prefix ratios (r = prefix / (prompt + canvas), the depth table's definition).
  std::vector<engine::Prompt> prompts;
  for (const auto& s : suite) {
    prompts.push_back(SamplePrompt(lm, s));
    const int n = static_cast<int>(prompts.back().tokens.size()) + base.sampler.gen_length;
    const int p = prompts.back().prefix_len;
    report.ratios.push_back(p > 0 && n <= cfg.context_length ? static_cast<double>(p) / n : -1.0);
  }
  report.workload = BuildWorkload(suite, report.ratios, options.workload);
  const Workload& w = report.workload;

  const engine::EngineOptions eo = engine::EngineOptionsFor(lm, {options.cache_budget_mb, 0});
  report.table = eo.depth_table;
  if (report.table.empty() && options.warn_no_depth_table)
    options.warn_no_depth_table(lm.depth_table_path());
  for (const engine::CacheMode& mode : options.modes) {
    BenchMode m;
    m.cache = mode;
    m.name = mode.ToString();
    report.modes.push_back(std::move(m));
  }
  AddTableModes(report, options, cfg);
  std::vector<std::unique_ptr<engine::Engine>> engines;
  for (const BenchMode& m : report.modes) {
    engine::EngineOptions own = eo;
    if (!m.depth_table_path.empty()) own.depth_table = m.depth_table;
    engines.push_back(std::make_unique<engine::Engine>(lm.model(), std::move(own)));
  }
  auto request_for = [&](size_t i, const engine::CacheMode& mode) {
    engine::RequestOptions r = base;
    const engine::Prompt& p = prompts[w.requests[i].sample];
    r.prompt = p.tokens;
    r.prefix_len = p.prefix_len;
    r.cache = mode;
    return r;
  };

  const size_t N = w.requests.size();
  std::fprintf(stderr, "bench: %zu prefixes x %d requests, %zu modes, gen %d, steps %d, block %d\n",
               w.groups.size(), options.workload.per_prefix, report.modes.size(),
               base.sampler.gen_length, base.sampler.steps, base.sampler.block_length);
  {  // Untimed warm-up: oneDNN JIT and page-in would otherwise be charged to the first mode.
    engine::Engine warm(lm.model(), {});
    warm.Run(request_for(0, engine::CacheMode{}));
  }
  const auto t_start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < N; ++i) {
    const SuiteSample& sample = suite[w.requests[i].sample];
    std::fprintf(stderr, "[%zu/%zu] %s (prefix %s, r=%.2f)", i + 1, N, sample.id.c_str(),
                 w.groups[w.requests[i].group].key.c_str(), report.ratios[w.requests[i].sample]);
    for (size_t k = 0; k < report.modes.size(); ++k) {
      BenchMode& m = report.modes[k];
      engine::RequestResult r = engines[k]->Run(request_for(i, m.cache));
      m.correct.push_back(IsCorrect(sample, lm.Detokenize(r.answer)));
      std::fprintf(stderr, "  %s %.2fs", m.name.c_str(), r.seconds);
      m.results.push_back(std::move(r));
    }
    std::fprintf(stderr, "\n");
  }
  report.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  for (size_t k = 0; k < report.modes.size(); ++k)
    report.modes[k].cache_stats = engines[k]->cache_stats();

  report.options = std::move(options);
  report.model_path = lm.path();
  report.model_name = cfg.name;
  report.depth_table_path = lm.depth_table_path();
  report.n_layer = cfg.n_layer;
  report.gemm = MeasureGemmReference(report, prompts, cfg);
  return report;
}

}  // namespace bicache::harness
