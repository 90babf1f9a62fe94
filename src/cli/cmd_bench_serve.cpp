// `bicache bench-serve`: load test of the HTTP server -- N concurrent clients sending chat
// completions whose system messages (the held-out suite's prefixes) are shared, per cache mode.
// The load driver is harness::RunBenchServe (harness/bench_serve.h: rounds, arrival pattern);
// the figures it reports are defined in harness/bench_serve_report.h and docs/benchmarks.md.
// This file turns flags into BenchServeOptions.
#include <signal.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cache_flags.h"
#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "engine/cache_mode.h"
#include "engine/loaded_model.h"
#include "engine/request.h"
#include "harness/bench_serve.h"
#include "harness/bench_serve_report.h"
#include "harness/suite.h"
#include "util/error.h"

namespace bicache::cli {

Runner AddBenchServe(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench-serve",
                                 "Load-test the HTTP server: concurrent clients, per cache mode");
  struct Opts {
    std::string model, suite, url, json, modes = "none,bicache,dual,bicache+dual";
    int clients = 8, requests = 32, rounds = 2, prefixes = 4, per_prefix = 4, threads = 0;
    int max_tokens = 32, steps = 0, block_length = 0, max_running = 0,
        refresh = engine::kDefaultRefreshInterval;
    double duration = 120, cache_budget_mb = 0, rate = 0;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  AddModelFlag(cmd, &o->model);
  AddThreadsFlag(cmd, &o->threads);
  cmd->add_option("--url", o->url,
                  "load an already running server (http://HOST:PORT) instead of starting one");
  AddSuiteFlag(cmd, &o->suite);
  cmd->add_option("--modes", o->modes,
                  "comma-separated cache modes (default: none,bicache,dual,bicache+dual)");
  cmd->add_option("--clients", o->clients, "concurrent clients")->check(CLI::Range(1, 1024));
  cmd->add_option("--requests", o->requests, "requests per mode")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--duration", o->duration, "seconds per mode at most (split over the rounds)")
      ->check(Positive());
  cmd->add_option("--rounds", o->rounds, "turns per mode, modes alternating")
      ->check(CLI::Range(1, 1000));
  AddWorkloadFlags(cmd, &o->prefixes, &o->per_prefix,
                   "requests M (distinct user turns) per prefix");
  AddGenLengthFlag(cmd, &o->max_tokens,
                   "tokens to generate: max_tokens of every request (--max-tokens: the old "
                   "spelling)",
                   "--max-tokens");
  AddStepsFlag(cmd, &o->steps, "denoising steps (default: gen length)");
  AddBlockLengthFlag(cmd, &o->block_length,
                     "block length (default: gen length/4 with a dual mode, else gen length)");
  AddRefreshFlag(cmd, &o->refresh, "bicache: refresh interval R sent with every request (0 = off)");
  cmd->add_option("--max-running", o->max_running,
                  "in-process server: batch size (default: --clients)")
      ->check(CLI::Range(0, 1 << 12));
  AddCacheBudgetFlag(cmd, &o->cache_budget_mb, "in-process server: prefix cache budget");
  cmd->add_option("--rate", o->rate,
                  "open loop: Poisson arrivals at this many requests/s per turn, --clients in "
                  "flight at most "
                  "(default 0: closed loop, every client sends again as soon as answered)")
      ->check(NonNegative());
  AddSeedFlag(cmd, &o->seed, "seed of the Poisson arrival times (--rate)");
  cmd->add_option("--json", o->json, "write the results as JSON to this file");
  return [=]() {
    ApplyThreads(o->threads);
    if (!std::isfinite(o->rate) || o->rate > 1e6) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--rate must be a finite number of requests/s up to 1e6");
    }
    signal(SIGPIPE,
           SIG_IGN);  // as in `serve`: a vanished peer is a failed write, not a dead process
    // ---- modes and settings (validated before anything loads) ----
    harness::BenchServeOptions bo;
    const ModeList modes = ParseModesFlag(o->modes);
    for (const engine::CacheMode& m : modes.modes) bo.modes.push_back(m.ToString());
    bo.block_length =
        o->block_length > 0 ? o->block_length : DefaultBlockLength(o->max_tokens, modes.any_dual);
    bo.steps = o->steps > 0 ? o->steps : o->max_tokens;
    bo.model = o->model, bo.suite = o->suite, bo.url = o->url;
    bo.clients = o->clients, bo.requests = o->requests, bo.rounds = o->rounds;
    bo.prefixes = o->prefixes, bo.per_prefix = o->per_prefix, bo.threads = o->threads;
    bo.max_tokens = o->max_tokens, bo.max_running = o->max_running, bo.refresh = o->refresh;
    bo.duration = o->duration, bo.cache_budget_mb = o->cache_budget_mb, bo.rate = o->rate;
    bo.seed = o->seed;

    auto lm = engine::LoadedModel::Load(o->model);
    const harness::BenchServeReport report = harness::RunBenchServe(std::move(bo), std::move(lm));
    const nlohmann::json doc = harness::BenchServeJson(report);
    harness::PrintBenchServeText(report, doc);
    if (!o->json.empty()) {
      std::ofstream f(o->json);
      f << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      if (!f) throw Error(ErrorKind::kIo, "--json: cannot write '" + o->json + "'");
    }
    return doc["errors"].get<int>() == 0 ? 0 : 1;
  };
}

static CommandRegistrar register_bench_serve(AddBenchServe, 82);

}  // namespace bicache::cli
