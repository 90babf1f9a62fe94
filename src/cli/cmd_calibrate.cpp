// `bicache calibrate`: measures how deep a shared prefix's K/V can be reused and saves the depth
// table next to the model, where `--cache bicache` finds it (harness/calibrate_run.h).
//
// Each sample is the request a server would run: chat prompt (system = prefix, user = prompt) +
// a canvas of gen_length mask tokens, so the ratio
//     r = prefix tokens / (prefix + prompt + canvas)
// is the quantity the engine looks up when serving. Two criteria (docs/bicache.md compares them):
//   kv_similarity (default): a depth is safe while every reused layer's prefix K/V stays this
//     similar to the request's own; any JSONL of {"prefix", "prompt"} works; two forwards per
//     sample.
//   answers: a depth is safe while the answers served at it agree with `none` on --min-agreement
//     of the bin's requests and are right as often; needs a suite with answers (the calibration
//     split); one `none` generation per sample, then one per depth up to its bin's first unsafe
//     one (at most n_layer + 1).
#include <unistd.h>

#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "engine/loaded_model.h"
#include "harness/calibrate_report.h"
#include "harness/calibrate_run.h"
#include "harness/eval.h"
#include "harness/suite.h"
#include "harness/svg_plot.h"
#include "util/error.h"

namespace bicache::cli {
Runner AddCalibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand("calibrate",
                                 "Measure how deep a shared prefix's K/V can be reused and save "
                                 "the BiCache depth table");
  struct Opts {
    std::string model, suite, out, svg, criterion = "kv_similarity";
    int limit = 0, threads = 0, steps = 0, block_length = 0;  // 0 = gen length
    harness::CalibrateOptions c;
  };
  auto o = std::make_shared<Opts>();
  o->c.base.sampler.gen_length = 32;
  AddModelFlag(cmd, &o->model);
  AddSuiteFlag(cmd, &o->suite,
               "JSONL of {\"prefix\", \"prompt\"[, \"answer\"]} samples (--criterion answers: "
               "use the calibration split)");
  cmd->add_option("--limit", o->limit, "first N samples of each family (0 = all)")
      ->check(NonNegative());
  cmd->add_option("--criterion", o->criterion,
                  "kv_similarity (prefix K/V similarity by layer), answers (agreement of the "
                  "answers with --cache none: the safe profile) or accuracy (accuracy within "
                  "--max-drop points of none's, the paired interval's lower end within twice "
                  "that: the fast profile)")
      ->capture_default_str();
  cmd->add_option(
         "--threshold", o->c.threshold,
         "kv_similarity: a layer is safe while its mean similarity exceeds this (0 < X < 1)")
      ->capture_default_str();
  cmd->add_option("--min-agreement", o->c.min_agreement,
                  "answers: a depth is safe while this share of a bin's answers equal none's "
                  "(0 < X <= 1)")
      ->capture_default_str();
  cmd->add_option("--max-drop", o->c.max_drop,
                  "accuracy: a depth is safe while a bin loses at most this many points of "
                  "accuracy against none (0 < X <= 100)")
      ->capture_default_str();
  cmd->add_option("--min-bin-samples", o->c.min_bin_samples,
                  "answers, accuracy: bins with fewer samples are dropped")
      ->capture_default_str();
  cmd->add_option("--bin", o->c.bin_pct,
                  "ratio bin width in percent (default 5 for kv_similarity, 10 for answers)");
  AddGenLengthFlag(cmd, &o->c.base.sampler.gen_length,
                   "mask canvas appended to every sample (as when serving)");
  AddStepsFlag(cmd, &o->steps, "answers: denoising steps (default: gen length)");
  AddBlockLengthFlag(cmd, &o->block_length,
                     "answers: semi-autoregressive block length (default: gen length; bench "
                     "uses gen/4 beside a dual mode)");
  AddRefreshFlag(cmd, &o->c.base.refresh_interval,
                 "answers: the fixed:D modes' refresh interval, as served");
  cmd->add_option("--batch", o->c.batch, "answers: requests stepping together")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--out", o->out,
                  "where to save the table (default: MODEL.gguf.depth.json, the safe profile; "
                  "MODEL.gguf.depth.fast.json for --criterion accuracy, the fast profile)");
  cmd->add_option("--svg", o->svg, "also draw the per-bin curves as an SVG here");
  AddThreadsFlag(cmd, &o->threads);
  return [=]() {
    harness::CalibrateOptions c = o->c;
    try {
      c.criterion = engine::ParseDepthCriterion(o->criterion);
    } catch (const Error& e) {
      throw Error(e.kind(), std::string("--criterion: ") + e.what());
    }
    const int gen = c.base.sampler.gen_length;
    c.base.sampler.steps = o->steps == 0 ? gen : o->steps;
    c.base.sampler.block_length = o->block_length == 0 ? gen : o->block_length;
    c.suite_name = harness::SuiteDisplayName(o->suite);
    ApplyThreads(o->threads);
    const std::vector<harness::SuiteSample> suite = harness::LoadSuite(o->suite);
    const std::vector<const harness::SuiteSample*> selected =
        harness::SelectSamples(suite, o->limit, {});
    auto lm = engine::LoadedModel::Load(o->model);
    ApplyModelThreads(o->threads, lm->model().config());
    if (isatty(2)) {
      c.progress = [](const std::string& phase, size_t i, size_t n) {
        std::fprintf(stderr, "\r\033[Kcalibrating (%s) %zu/%zu", phase.c_str(), i, n);
        std::fflush(stderr);
      };
    }
    // FieldErrors name {fields}; main renders them as flags.
    harness::CalibrateReport report = harness::RunCalibrate(*lm, suite, selected, std::move(c));
    if (isatty(2)) std::fprintf(stderr, "\r\033[K");
    if (report.skipped_too_long || report.skipped_no_prefix) {
      std::fprintf(stderr,
                   "bicache: warning: skipped %d samples longer than the context (%d tokens) and "
                   "%d without a prefix\n",
                   report.skipped_too_long, lm->model().config().context_length,
                   report.skipped_no_prefix);
    }
    const bool fast = report.options.criterion == engine::DepthCriterion::kAccuracy;
    const std::string out =
        o->out.empty() ? engine::DepthTable::PathForModel(lm->path(), fast ? "fast" : "safe")
                       : o->out;
    report.table.Save(out);
    if (!o->svg.empty()) {
      harness::WriteCalibrationSvg(
          o->svg, report.table,
          lm->path() + ", " + engine::DescribeCalibration(*report.table.calibrated_with()));
    }
    harness::PrintCalibrateText(stdout, report, lm->path(), out);
    return 0;
  };
}

static CommandRegistrar register_calibrate(AddCalibrate, 55);

}  // namespace bicache::cli
