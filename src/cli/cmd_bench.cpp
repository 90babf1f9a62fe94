// `bicache bench`: the paper's comparison side by side -- every cache mode on the same request
// stream, in one process, on the same depth table. The run is harness::RunBench (harness/bench.h,
// which says how the modes are kept fair); the definitions of the reported figures are in
// harness/bench_report.h and docs/benchmarks.md. This file turns flags into BenchOptions.
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cache_flags.h"
#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "harness/bench.h"
#include "harness/bench_report.h"
#include "harness/suite.h"
#include "util/error.h"

namespace bicache::cli {
namespace {

// "a, b,c" -> {a, b, c}; `flag` and `what` name the list in the error for an empty item.
std::vector<std::string> SplitList(const std::string& text, const char* flag, const char* what) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text + ",") {
    if (c == ',') {
      if (cur.empty()) {
        throw Error(ErrorKind::kInvalidArgument,
                    std::string(flag) + " '" + text + "': empty " + what);
      }
      out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

}  // namespace

Runner AddBench(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Compare cache modes side by side on the task suite (throughput, accuracy)");
  struct Opts {
    std::string model, suite, modes = "none,llm,dual,bicache,bicache+dual", json, svg;
    std::string order = "interleaved", band = "all", depth_tables;
    int prefixes = 0, per_prefix = 4, threads = 0;
    SamplingFlags s;
  };
  auto o = std::make_shared<Opts>();
  AddModelFlag(cmd, &o->model);
  AddSuiteFlag(cmd, &o->suite);
  AddWorkloadFlags(cmd, &o->prefixes, &o->per_prefix, "requests M per prefix");
  cmd->add_option("--modes", o->modes,
                  "comma-separated cache modes to compare (default: "
                  "none,llm,dual,bicache,bicache+dual; none,prefix for a block-diffusion "
                  "model); with a "
                  "dual mode and no --block-length every mode uses block length gen-length/4");
  cmd->add_option("--depth-tables", o->depth_tables,
                  "comma-separated depth tables (bicache calibrate's JSON): one more mode each, "
                  "served like bicache with that table and named by its criterion and threshold "
                  "(e.g. bicache[answers 0.98]) -- the speed/accuracy trade-off on the same "
                  "requests");
  cmd->add_option("--order", o->order,
                  "interleaved (A1 B1 .. A2 B2 ..) or grouped (A1 A2 .. B1 B2 ..)");
  cmd->add_option("--ratio-band", o->band,
                  "prefixes by prefix ratio: all, short, long, or sweep (P of each)");
  cmd->add_option("--json", o->json, "write the results as JSON to this file");
  cmd->add_option("--svg", o->svg,
                  "write a throughput/accuracy + calibration plot (SVG) to this file");
  AddThreadsFlag(cmd, &o->threads);
  o->s.gen_length = 32;
  o->s.Register(cmd);
  return [=]() {
    if (cmd->count("--cache") > 0) {
      throw Error(ErrorKind::kInvalidArgument,
                  "bench compares the modes given by --modes; --cache is not used here");
    }
    ApplyThreads(o->threads);
    // Modes (validated before the model loads), the same settings for every mode.
    harness::BenchOptions bench;
    const ModeList modes = ParseModesFlag(o->modes);
    bench.modes = modes.modes;
    if (!o->depth_tables.empty()) {
      for (const std::string& path : SplitList(o->depth_tables, "--depth-tables", "path"))
        bench.depth_tables.push_back({path, engine::DepthTable::Load(path)});
    }
    SamplingFlags sf = o->s;
    if (sf.block_length == 0) sf.block_length = DefaultBlockLength(sf.gen_length, modes.any_dual);
    bench.suite = o->suite;
    bench.base.sampler = sf.Sampler();
    bench.base.refresh_interval = sf.refresh;
    bench.workload = {o->prefixes, o->per_prefix, harness::ParseRequestOrder(o->order),
                      harness::ParseRatioBand(o->band)};
    bench.cache_budget_mb = sf.cache_budget_mb;
    bench.threads = o->threads;
    bench.warn_no_depth_table = WarnNoDepthTable;

    auto lm = LoadModelWithProfile(o->model, o->s.depth_profile);
    ApplyModelThreads(o->threads, lm->model().config());
    // A block-diffusion model reuses prefixes exactly: no cross-request reuse against exact reuse.
    if (lm->model().config().block_causal() && cmd->count("--modes") == 0)
      bench.modes = ParseModesFlag("none,prefix").modes;
    UseModelBlock(lm->model().config(), o->s.block_length, &bench.base.sampler);
    const harness::BenchReport report = harness::RunBench(std::move(bench), *lm);
    const nlohmann::json doc = harness::BenchJson(report);
    harness::PrintBenchText(report, doc);
    if (!o->json.empty()) {
      std::ofstream f(o->json);
      f << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      if (!f) throw Error(ErrorKind::kIo, "--json: cannot write '" + o->json + "'");
    }
    if (!o->svg.empty()) harness::WriteBenchPlot(o->svg, report, doc);
    return 0;
  };
}

static CommandRegistrar register_bench(AddBench, 80);

}  // namespace bicache::cli
