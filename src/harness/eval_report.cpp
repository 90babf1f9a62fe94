#include "harness/eval_report.h"

#include <cstdio>

#include "diffusion/sampler_config.h"
#include "harness/paired_stats.h"

namespace bicache::harness {

EvalSummary SummarizeEval(const EvalReport& report) {
  EvalSummary s;
  for (const EvalOutcome& out : report.outcomes) {
    EvalSummary::Tally& t = s.by_family[out.sample->family];
    t.n++, s.all.n++;
    t.correct += out.correct, s.all.correct += out.correct;
    if (!out.error.empty()) {
      s.errors++;
      continue;
    }
    s.ran++;
    s.steps += out.r.steps, s.forwards += out.r.forwards, s.depth += out.r.depth,
        s.ratio += out.r.prefix_ratio;
    s.hits += out.r.prefix_hit;
    s.seconds += out.r.seconds;
    s.answer_tokens += out.r.answer.size();
  }
  return s;
}

void PrintEvalText(const EvalReport& report, const EvalSummary& s) {
  const engine::RequestOptions& base = report.options.base;
  std::printf(
      "model: %s\nsuite: %s\nsettings: cache %s%s, gen %d, steps %d, block %d, %s, seed %llu\n",
      report.model_path.c_str(), report.options.suite.c_str(), base.cache.ToString().c_str(),
      base.cache.prefix == engine::PrefixReuse::kBicache && !report.have_depth_table
          ? " (no depth table: depth 0)"
          : "",
      base.sampler.gen_length, base.sampler.steps, base.sampler.block_length,
      diffusion::AlgorithmName(base.sampler.algorithm), (unsigned long long)base.sampler.seed);
  // The Wilson 95% interval says how far the accuracy could move on another draw of as many
  // samples: with 100 samples it spans about +-10 points.
  std::printf("%-12s %5s %8s %9s  %s\n", "family", "n", "correct", "accuracy", "95% interval");
  auto row = [](const std::string& name, const EvalSummary::Tally& t) {
    const Interval ci = WilsonInterval(t.correct, t.n);
    std::printf("%-12s %5d %8d %9.3f  [%.3f, %.3f]\n", name.c_str(), t.n, t.correct, t.accuracy(),
                ci.lo, ci.hi);
  };
  for (const std::string& f : report.family_order) {
    if (auto it = s.by_family.find(f); it != s.by_family.end()) row(f, it->second);
  }
  row("overall", s.all);
  std::printf(
      "mean steps %.2f, mean forwards %.2f, %.1f tokens/s, cache hit rate %.3f, mean depth "
      "%.2f, "
      "mean reused-prefix ratio %.3f, %.1f s%s\n",
      s.mean(s.steps), s.mean(s.forwards), s.tokens_per_s(), s.mean(s.hits), s.mean(s.depth),
      s.mean(s.ratio), report.wall_seconds,
      s.errors ? (", " + std::to_string(s.errors) + " did not fit the context").c_str() : "");
}

nlohmann::json EvalJson(const EvalReport& report, const EvalSummary& s) {
  using nlohmann::json;
  auto ci95 = [](const EvalSummary::Tally& t) {
    const Interval ci = WilsonInterval(t.correct, t.n);
    return json::array({ci.lo, ci.hi});
  };
  json accuracy = json::object(), accuracy_ci95 = json::object();
  for (const std::string& f : report.family_order) {
    if (auto it = s.by_family.find(f); it != s.by_family.end()) {
      accuracy[f] = it->second.accuracy();
      accuracy_ci95[f] = ci95(it->second);
    }
  }
  json results = json::array();
  for (const EvalOutcome& out : report.outcomes) {
    json r = {{"id", out.sample->id},
              {"family", out.sample->family},
              {"answer", out.answer},
              {"expected", out.sample->answer},
              {"correct", out.correct},
              {"depth", out.r.depth},
              {"prefix_tokens", out.r.prefix_used},
              {"prefix_hit", out.r.prefix_hit},
              {"prefix_ratio", out.r.prefix_ratio},
              {"steps", out.r.steps},
              {"forwards", out.r.forwards},
              {"finish_reason", out.r.finish_reason},
              {"seconds", out.r.seconds}};
    if (!out.error.empty()) r["error"] = out.error;
    results.push_back(std::move(r));
  }
  const EvalOptions& o = report.options;
  const auto& sc = o.base.sampler;
  return {{"n", s.all.n},
          {"overall", s.all.accuracy()},
          {"overall_ci95", ci95(s.all)},
          {"accuracy", accuracy},
          {"accuracy_ci95", accuracy_ci95},
          {"settings",
           {{"model", report.model_path},
            {"suite", o.suite},
            {"limit_per_family", o.limit},
            {"families", o.families},
            {"gen_length", sc.gen_length},
            {"steps", sc.steps},
            {"block_length", sc.block_length},
            {"algorithm", diffusion::AlgorithmName(sc.algorithm)},
            {"temperature", sc.temperature},
            {"top_p", sc.top_p},
            {"top_k", sc.top_k},
            {"alg_temp", sc.alg_temp},
            {"threshold", sc.threshold},
            {"cfg", sc.cfg_scale},
            {"seed", sc.seed},
            {"cache", o.base.cache.ToString()},
            {"refresh", o.base.refresh_interval},
            {"batch", o.batch},
            {"depth_table", report.depth_table_path}}},
          {"summary",
           {{"errors", s.errors},
            {"mean_steps", s.mean(s.steps)},
            {"mean_forwards", s.mean(s.forwards)},
            {"tokens_per_s", s.tokens_per_s()},
            {"cache_hit_rate", s.mean(s.hits)},
            {"mean_depth", s.mean(s.depth)},
            {"mean_prefix_ratio", s.mean(s.ratio)},
            {"seconds", report.wall_seconds}}},
          {"results", results}};
}

}  // namespace bicache::harness
