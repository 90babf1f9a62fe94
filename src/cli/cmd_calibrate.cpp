// `bicache calibrate`: measures how deep a shared prefix's K/V can be reused (harness/calibrate.h)
// and saves the depth table next to the model, where `--cache bicache` finds it.
//
// Each sample is the forward a served request would run: chat prompt (system = prefix, user =
// prompt) + a canvas of gen_length mask tokens, so the ratio
//     r = prefix tokens / (prefix + prompt + canvas)
// is the same quantity the engine looks up when serving. Any JSONL of {"prefix", "prompt"} objects
// works (answers and families are optional); the held-out suite spans ratios from short to long
// system prompts. Cost: two forwards per sample (prefix alone, whole request).
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "engine/loaded_model.h"
#include "harness/calibrate.h"
#include "harness/suite.h"
#include "util/error.h"

namespace bicache::cli {

Runner AddCalibrate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "calibrate", "Measure prefix K/V similarity by layer and save the BiCache depth table");
  struct Opts {
    std::string model, suite, out;
    int limit = 0, bin = 5, gen_length = 32, threads = 0;
    double threshold = 0.97;
  };
  auto o = std::make_shared<Opts>();
  AddModelFlag(cmd, &o->model);
  AddSuiteFlag(cmd, &o->suite, "JSONL of {\"prefix\", \"prompt\"} samples");
  cmd->add_option("--limit", o->limit, "first N samples of each family (0 = all)")
      ->check(NonNegative());
  cmd->add_option("--threshold", o->threshold,
                  "a layer is safe while its mean similarity exceeds this (0 < X < 1)");
  cmd->add_option("--bin", o->bin, "ratio bin width in percent");
  cmd->add_option("--gen-length", o->gen_length,
                  "mask canvas appended to every sample (as when serving)");
  cmd->add_option("--out", o->out, "where to save the table (default: MODEL.gguf.depth.json)");
  AddThreadsFlag(cmd, &o->threads);
  return [=]() {
    if (o->gen_length < 1) throw Error(ErrorKind::kInvalidArgument, "--gen-length must be >= 1");
    // Checked here too (Calibrate does) so a bad flag fails before the model loads.
    if (!(o->threshold > 0 && o->threshold < 1))
      throw Error(ErrorKind::kInvalidArgument, "--threshold must be in (0, 1)");
    if (o->bin < 1 || o->bin > 50)
      throw Error(ErrorKind::kInvalidArgument, "--bin must be in [1, 50] percent");
    ApplyThreads(o->threads);
    const std::vector<harness::SuiteSample> suite = harness::LoadSuite(o->suite);
    auto lm = engine::LoadedModel::Load(o->model);
    ApplyModelThreads(o->threads, lm->model().config());
    const model::ModelConfig& cfg = lm->model().config();

    std::vector<harness::CalibrationSample> samples;
    std::map<std::string, int> taken;
    int too_long = 0, no_prefix = 0;
    for (const harness::SuiteSample& s : suite) {
      if (o->limit > 0 && taken[s.family] >= o->limit) continue;
      taken[s.family]++;
      const engine::Prompt p = harness::SamplePrompt(*lm, s);
      harness::CalibrationSample cs;
      cs.prefix_len = p.prefix_len;
      cs.tokens = p.tokens;
      cs.tokens.resize(p.tokens.size() + o->gen_length, cfg.mask_token_id);
      if (cs.prefix_len <= 0) {
        no_prefix++;
      } else if (static_cast<int>(cs.tokens.size()) > cfg.context_length) {
        too_long++;
      } else {
        samples.push_back(std::move(cs));
      }
    }
    if (too_long || no_prefix) {
      std::fprintf(stderr,
                   "bicache: warning: skipped %d samples longer than the context (%d tokens) and "
                   "%d without a prefix\n",
                   too_long, cfg.context_length, no_prefix);
    }
    if (samples.empty()) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--suite '" + o->suite + "': no sample has a prefix and fits the context");
    }
    const bool tty = isatty(2);
    const engine::DepthTable table =
        harness::Calibrate(lm->model(), samples, o->threshold, o->bin, [&](size_t i, size_t n) {
          if (!tty) return;
          std::fprintf(stderr, "\r\033[Kcalibrating %zu/%zu", i, n);
          if (i == n) std::fprintf(stderr, "\r\033[K");
          std::fflush(stderr);
        });
    const std::string out = o->out.empty() ? lm->depth_table_path() : o->out;
    table.Save(out);

    // Curves: one row per bin, similarity of each layer, and the bin's own depth (before the
    // monotone envelope, which the step function below shows).
    std::printf("model: %s (%d layers), %zu samples, threshold %.3f, bins of %d%%\n",
                lm->path().c_str(), cfg.n_layer, samples.size(), o->threshold, o->bin);
    std::printf("%-8s %7s ", "ratio%", "samples");
    for (int l = 0; l < cfg.n_layer; ++l) std::printf(" %6s", ("L" + std::to_string(l)).c_str());
    std::printf(" %6s\n", "depth");
    for (const engine::CalibrationBin& b : table.bins()) {
      const int depth = engine::DepthTable::BinDepth(b.similarity, o->threshold, cfg.n_layer);
      std::printf("%3d-%-4d %7d ", b.ratio_pct, b.ratio_pct + o->bin, b.samples);
      for (double v : b.similarity) std::printf(" %6.3f", v);
      std::printf(" %6d\n", depth);
    }
    std::printf("depth table (r = prefix / (prefix + prompt + canvas)):\n");
    if (table.empty()) {
      std::printf("  every r: depth 0 (no ratio reaches a safe depth at this threshold)\n");
    } else {
      std::printf("  r < %d%%: depth 0\n", table.points().front().ratio_pct);
      for (const engine::DepthPoint& p : table.points())
        std::printf("  r >= %d%%: depth %d\n", p.ratio_pct, p.depth);
    }
    std::printf("saved to %s\n", out.c_str());
    return 0;
  };
}

static CommandRegistrar register_calibrate(AddCalibrate, 55);

}  // namespace bicache::cli
