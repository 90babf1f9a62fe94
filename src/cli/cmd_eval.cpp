// `bicache eval`: accuracy of a model on a task suite under one sampler / cache setting.
//
// Every selected sample runs through ONE engine, one request after another in file order, so the
// prefix store fills exactly as it would for a stream of users sharing system prompts; with a fixed
// --seed the run is deterministic (same answers, same hits). `--limit N` keeps the first N samples
// of EACH family (in file order): a small limit still covers every family, which a global
// "first N" would not (the suite is grouped by family). A sample whose prompt + canvas does not
// fit the model's context is scored wrong and listed with an "error" (it is not silently dropped,
// so n and the accuracies always refer to the same selection).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "harness/suite.h"
#include "util/error.h"

namespace bicache::cli {
namespace {

struct Outcome {
  const harness::SuiteSample* sample = nullptr;
  std::string answer, error;
  bool correct = false;
  engine::RequestResult r;
};

// "a,b" -> {"a","b"}; empty items are a flag error.
std::vector<std::string> SplitList(const std::string& text, const char* flag) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty())
      throw Error(ErrorKind::kInvalidArgument,
                  std::string(flag) + ": empty item in '" + text + "'");
    out.push_back(item);
  }
  return out;
}

// The samples to run, in file order: the first `limit` of each family (0 = all), restricted to
// `families` when given (each must exist in the suite).
std::vector<const harness::SuiteSample*> Select(const std::vector<harness::SuiteSample>& suite,
                                                int limit,
                                                const std::vector<std::string>& families) {
  const std::vector<std::string> known = harness::Families(suite);
  for (const std::string& f : families) {
    if (std::find(known.begin(), known.end(), f) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error(ErrorKind::kInvalidArgument,
                  "--families: '" + f + "' is not in the suite (it has: " + list + ")");
    }
  }
  std::map<std::string, int> taken;
  std::vector<const harness::SuiteSample*> out;
  for (const auto& s : suite) {
    if (!families.empty() &&
        std::find(families.begin(), families.end(), s.family) == families.end())
      continue;
    if (limit > 0 && taken[s.family] >= limit) continue;
    taken[s.family]++;
    out.push_back(&s);
  }
  return out;
}

}  // namespace

Runner AddEval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Accuracy and speed of a model on a task suite");
  struct Opts {
    std::string model, suite = harness::DefaultSuitePath(), families, json;
    int limit = 0, threads = 0, batch = 1;
    SamplingFlags s;
  };
  auto o = std::make_shared<Opts>();
  AddModelFlag(cmd, &o->model);
  cmd->add_option("--suite", o->suite,
                  "JSONL suite (default: the embedded model's held-out suite)");
  cmd->add_option("--limit", o->limit, "first N samples of each family (0 = all)")
      ->check(NonNegative());
  cmd->add_option(
         "--batch", o->batch,
         "samples run together in one forward (the answers do not depend on it; larger is faster)")
      ->check(CLI::Range(1, 256));
  cmd->add_option("--families", o->families, "comma-separated families to run (default: all)");
  cmd->add_option("--json", o->json,
                  "write per-sample results and the summary as JSON here ('-' = stdout)");
  AddThreadsFlag(cmd, &o->threads);
  o->s.Register(cmd);
  return [=]() {
    ApplyThreads(o->threads);
    engine::RequestOptions base;
    base.sampler = o->s.Sampler();
    base.cache = o->s.Cache();
    base.refresh_interval = o->s.refresh;
    const std::vector<std::string> families =
        o->families.empty() ? std::vector<std::string>{} : SplitList(o->families, "--families");
    const std::vector<harness::SuiteSample> suite = harness::LoadSuite(o->suite);
    const std::vector<const harness::SuiteSample*> selected = Select(suite, o->limit, families);
    auto lm = engine::LoadedModel::Load(o->model);
    ApplyModelThreads(o->threads, lm->model().config());
    const model::ModelConfig& cfg = lm->model().config();
    base.sampler.stop_ids = lm->stop_ids();
    base.sampler.mask_id = cfg.mask_token_id;
    diffusion::Validate(base.sampler);  // flag errors stop the run before any sample does
    engine::EngineOptions eo;
    eo.cache_budget_bytes = static_cast<size_t>(o->s.cache_budget_mb * 1024 * 1024);
    eo.depth_table = lm->LoadDepthTable();
    eo.audit_rate = o->s.audit_rate;
    const bool have_table = !eo.depth_table.empty();
    engine::Engine eng(lm->model(), std::move(eo));

    const bool tty = isatty(2);
    const auto t0 = std::chrono::steady_clock::now();
    // Samples start in suite order (so prefix entries are built by the same samples whatever the
    // batch) and up to --batch of them step together; a finished one makes room for the next.
    std::vector<Outcome> outcomes(selected.size());
    int n_correct_so_far = 0, n_done = 0;
    auto finish = [&](size_t i) {
      n_correct_so_far += outcomes[i].correct;
      ++n_done;
      if (tty) {
        std::fprintf(stderr, "\r\033[K[%d/%zu] %s  accuracy so far %.3f", n_done, selected.size(),
                     selected[i]->id.c_str(), static_cast<double>(n_correct_so_far) / n_done);
        std::fflush(stderr);
      }
    };
    std::vector<std::pair<size_t, std::unique_ptr<engine::Request>>> running;
    size_t next = 0;
    while (next < selected.size() || !running.empty()) {
      while (next < selected.size() && static_cast<int>(running.size()) < o->batch) {
        const size_t i = next++;
        const harness::SuiteSample* s = selected[i];
        outcomes[i].sample = s;
        const engine::Prompt prompt = harness::SamplePrompt(*lm, *s);
        const int need = static_cast<int>(prompt.tokens.size()) + base.sampler.gen_length;
        if (need > cfg.context_length) {
          outcomes[i].error = "needs " + std::to_string(need) + " tokens, the context holds " +
                              std::to_string(cfg.context_length);
          finish(i);
          continue;
        }
        engine::RequestOptions req = base;
        req.prompt = prompt.tokens;
        req.prefix_len = prompt.prefix_len;
        const auto ts = std::chrono::steady_clock::now();
        auto started =
            eng.Start(std::move(req));  // a prefix-entry build on a miss counts to this sample
        started->add_seconds(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - ts).count());
        running.emplace_back(i, std::move(started));
      }
      if (running.empty()) continue;
      std::vector<engine::Request*> batch;
      for (auto& [i, r] : running) batch.push_back(r.get());
      eng.StepBatch(batch);
      for (auto it = running.begin(); it != running.end();) {
        if (!it->second->done()) {
          ++it;
          continue;
        }
        Outcome& out = outcomes[it->first];
        out.r = it->second->result();
        out.answer = lm->Detokenize(out.r.answer);
        out.correct = harness::IsCorrect(*out.sample, out.answer);
        finish(it->first);
        it = running.erase(it);
      }
    }
    if (tty) std::fprintf(stderr, "\r\033[K");
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Aggregates. Speed and cache figures are over the samples that ran (errors have none).
    struct Tally {
      int n = 0, correct = 0;
    };
    std::map<std::string, Tally> by_family;
    Tally all;
    int ran = 0, errors = 0, hits = 0;
    double steps = 0, forwards = 0, depth = 0, ratio = 0, seconds = 0, answer_tokens = 0;
    for (const Outcome& out : outcomes) {
      Tally& t = by_family[out.sample->family];
      t.n++, all.n++;
      t.correct += out.correct, all.correct += out.correct;
      if (!out.error.empty()) {
        errors++;
        continue;
      }
      ran++;
      steps += out.r.steps, forwards += out.r.forwards, depth += out.r.depth,
          ratio += out.r.prefix_ratio;
      hits += out.r.prefix_hit;
      seconds += out.r.seconds;
      answer_tokens += out.r.answer.size();
    }
    auto mean = [&](double x) { return ran > 0 ? x / ran : 0.0; };
    auto acc = [](const Tally& t) { return t.n > 0 ? static_cast<double>(t.correct) / t.n : 0.0; };
    const double tok_s = seconds > 0 ? answer_tokens / seconds : 0.0;
    const std::vector<std::string> fam_order = harness::Families(suite);
    if (ran == 0 && errors > 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  "none of the " + std::to_string(errors) + " samples fits the model's context (" +
                      std::to_string(cfg.context_length) + " tokens) with --gen-length " +
                      std::to_string(base.sampler.gen_length) + ": lower --gen-length");
    }
    if (errors > 0) {
      std::fprintf(stderr,
                   "bicache: warning: %d of %zu samples do not fit the model's context (%d tokens) "
                   "and are scored wrong\n",
                   errors, outcomes.size(), cfg.context_length);
    }

    const bool json_stdout = o->json == "-";
    if (!json_stdout) {
      std::printf(
          "model: %s\nsuite: %s\nsettings: cache %s%s, gen %d, steps %d, block %d, %s, seed %llu\n",
          lm->path().c_str(), o->suite.c_str(), base.cache.ToString().c_str(),
          base.cache.prefix == engine::PrefixReuse::kBicache && !have_table
              ? " (no depth table: depth 0)"
              : "",
          base.sampler.gen_length, base.sampler.steps, base.sampler.block_length,
          diffusion::AlgorithmName(base.sampler.algorithm), (unsigned long long)base.sampler.seed);
      std::printf("%-12s %5s %8s %9s\n", "family", "n", "correct", "accuracy");
      for (const std::string& f : fam_order) {
        auto it = by_family.find(f);
        if (it == by_family.end()) continue;
        std::printf("%-12s %5d %8d %9.3f\n", f.c_str(), it->second.n, it->second.correct,
                    acc(it->second));
      }
      std::printf("%-12s %5d %8d %9.3f\n", "overall", all.n, all.correct, acc(all));
      std::printf(
          "mean steps %.2f, mean forwards %.2f, %.1f tokens/s, cache hit rate %.3f, mean depth "
          "%.2f, "
          "mean reused-prefix ratio %.3f, %.1f s%s\n",
          mean(steps), mean(forwards), tok_s, mean(hits), mean(depth), mean(ratio), wall,
          errors ? (", " + std::to_string(errors) + " did not fit the context").c_str() : "");
    }
    if (!o->json.empty()) {
      using nlohmann::json;
      json accuracy = json::object();
      for (const std::string& f : fam_order) {
        if (auto it = by_family.find(f); it != by_family.end()) accuracy[f] = acc(it->second);
      }
      json results = json::array();
      for (const Outcome& out : outcomes) {
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
      const auto& sc = base.sampler;
      json j = {{"n", all.n},
                {"overall", acc(all)},
                {"accuracy", accuracy},
                {"settings",
                 {{"model", lm->path()},
                  {"suite", o->suite},
                  {"limit_per_family", o->limit},
                  {"families", families},
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
                  {"cache", base.cache.ToString()},
                  {"refresh", base.refresh_interval},
                  {"batch", o->batch},
                  {"depth_table", have_table ? lm->depth_table_path() : ""}}},
                {"summary",
                 {{"errors", errors},
                  {"mean_steps", mean(steps)},
                  {"mean_forwards", mean(forwards)},
                  {"tokens_per_s", tok_s},
                  {"cache_hit_rate", mean(hits)},
                  {"mean_depth", mean(depth)},
                  {"mean_prefix_ratio", mean(ratio)},
                  {"seconds", wall}}},
                {"results", results}};
      const std::string text = j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
      if (json_stdout) {
        std::fputs(text.c_str(), stdout);
      } else {
        std::ofstream f(o->json);
        f << text;
        if (!f) throw Error(ErrorKind::kIo, "--json: cannot write '" + o->json + "'");
      }
    }
    return 0;
  };
}

static CommandRegistrar register_eval(AddEval, 50);

}  // namespace bicache::cli
