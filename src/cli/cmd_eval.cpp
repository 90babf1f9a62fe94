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

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "harness/eval.h"
#include "harness/eval_report.h"
#include "harness/suite.h"
#include "util/error.h"

namespace bicache::cli {
namespace {

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

}  // namespace

Runner AddEval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Accuracy and speed of a model on a task suite");
  struct Opts {
    std::string model, suite, families, json;
    int limit = 0, threads = 0, batch = 1;
    SamplingFlags s;
  };
  auto o = std::make_shared<Opts>();
  AddModelFlag(cmd, &o->model);
  AddSuiteFlag(cmd, &o->suite);
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
    harness::EvalOptions eval;
    eval.suite = o->suite;
    eval.limit = o->limit;
    eval.batch = o->batch;
    eval.base.sampler = o->s.Sampler();
    eval.base.cache = o->s.Cache();
    eval.base.refresh_interval = o->s.refresh;
    eval.cache_budget_mb = o->s.cache_budget_mb;
    eval.audit_rate = o->s.audit_rate;
    if (!o->families.empty()) eval.families = SplitList(o->families, "--families");
    const std::vector<harness::SuiteSample> suite = harness::LoadSuite(o->suite);
    const std::vector<const harness::SuiteSample*> selected =
        harness::SelectSamples(suite, o->limit, eval.families);
    auto lm = LoadModelWithProfile(o->model, o->s.depth_profile);
    ApplyModelThreads(o->threads, lm->model().config());
    UseModelBlock(lm->model().config(), o->s.block_length, &eval.base.sampler);
    const bool tty = isatty(2);
    if (tty) {
      eval.progress = [](int done, size_t n, const harness::SuiteSample& s, int correct) {
        std::fprintf(stderr, "\r\033[K[%d/%zu] %s  accuracy so far %.3f", done, n, s.id.c_str(),
                     static_cast<double>(correct) / done);
        std::fflush(stderr);
      };
    }
    const harness::EvalReport report = harness::RunEval(std::move(eval), *lm, suite, selected);
    if (tty) std::fprintf(stderr, "\r\033[K");
    harness::CheckSomeSampleFits(report);
    const harness::EvalSummary summary = harness::SummarizeEval(report);
    if (summary.errors > 0) {
      std::fprintf(stderr,
                   "bicache: warning: %d of %zu samples do not fit the model's context (%d tokens) "
                   "and are scored wrong\n",
                   summary.errors, report.outcomes.size(), report.context_length);
    }
    const bool json_stdout = o->json == "-";
    if (!json_stdout) harness::PrintEvalText(report, summary);
    if (!o->json.empty()) {
      using nlohmann::json;
      const std::string text =
          harness::EvalJson(report, summary).dump(1, ' ', false, json::error_handler_t::replace) +
          "\n";
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
