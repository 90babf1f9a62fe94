#include "harness/calibrate_run.h"

#include <chrono>

#include "harness/calibrate.h"
#include "harness/calibrate_answers.h"
#include "util/field_error.h"

namespace bicache::harness {
namespace {

void CheckCommon(const CalibrateOptions& o) {
  if (o.base.sampler.gen_length < 1)
    throw FieldError(ErrorKind::kInvalidArgument, "{gen_length} must be >= 1");
  CheckRatioBinPct(o.bin_pct);
}

// The selected samples a served request can run (a shared prefix, and prompt + canvas within the
// context), their prompts and prefix ratios r = prefix / (prompt + canvas); the others are counted
// in `out`. Throws FieldError naming {suite} when none is left.
struct Runnable {
  std::vector<const SuiteSample*> samples;
  std::vector<engine::Prompt> prompts;
  std::vector<double> ratios;
};

Runnable SelectRunnable(const engine::LoadedModel& lm,
                        const std::vector<const SuiteSample*>& selected, int gen_length,
                        CalibrateReport& out) {
  const int context = lm.model().config().context_length;
  Runnable r;
  for (const SuiteSample* s : selected) {
    engine::Prompt p = SamplePrompt(lm, *s);
    const int total = static_cast<int>(p.tokens.size()) + gen_length;
    if (p.prefix_len <= 0) {
      out.skipped_no_prefix++;
    } else if (total > context) {
      out.skipped_too_long++;
    } else {
      r.samples.push_back(s);
      r.ratios.push_back(static_cast<double>(p.prefix_len) / total);
      r.prompts.push_back(std::move(p));
    }
  }
  if (r.samples.empty()) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{suite}: no selected sample has a prefix and fits the context (" +
                         std::to_string(context) + " tokens) with {gen_length} " +
                         std::to_string(gen_length));
  }
  out.samples = r.samples.size();
  return r;
}

// Prefix + prompt + a canvas of gen_length mask tokens: the forward a served request runs.
CalibrateReport RunKv(const engine::LoadedModel& lm,
                      const std::vector<const SuiteSample*>& selected, CalibrateReport out) {
  const CalibrateOptions& o = out.options;
  if (!(o.threshold > 0 && o.threshold < 1))
    throw FieldError(ErrorKind::kInvalidArgument, "{threshold} must be in (0, 1)");
  const Runnable runnable = SelectRunnable(lm, selected, o.base.sampler.gen_length, out);
  std::vector<CalibrationSample> samples;
  for (const engine::Prompt& p : runnable.prompts) {
    CalibrationSample cs;
    cs.prefix_len = p.prefix_len;
    cs.tokens = p.tokens;
    cs.tokens.resize(p.tokens.size() + o.base.sampler.gen_length,
                     lm.model().config().mask_token_id);
    samples.push_back(std::move(cs));
  }
  out.table = Calibrate(lm.model(), samples, o.threshold, o.bin_pct, [&](size_t i, size_t n) {
    if (o.progress) o.progress("kv", i, n);
  });
  return out;
}

CalibrateReport RunAnswers(const engine::LoadedModel& lm, const std::vector<SuiteSample>& suite,
                           const std::vector<const SuiteSample*>& selected, CalibrateReport out) {
  const CalibrateOptions& o = out.options;
  AnswerCalibrationOptions a;
  a.base = o.base;
  a.criterion = o.criterion;
  a.min_agreement = o.min_agreement;
  a.max_drop = o.max_drop;
  a.bin_pct = o.bin_pct;
  a.min_bin_samples = o.min_bin_samples;
  a.batch = o.batch;
  if (o.progress)
    a.progress = [&](int d, size_t done, size_t n) {
      o.progress("depth " + std::to_string(d), done, n);
    };
  CheckAnswerCalibrationOptions(a);  // before the selection's {suite} error, as kv's threshold
  const Runnable runnable = SelectRunnable(lm, selected, o.base.sampler.gen_length, out);
  AnswerCalibration r =
      CalibrateByAnswers(lm, suite, runnable.samples, runnable.ratios, std::move(a));
  out.table = std::move(r.table);
  out.none_accuracy = r.none_accuracy;
  out.runs = r.runs;
  return out;
}

}  // namespace

CalibrateReport RunCalibrate(const engine::LoadedModel& lm, const std::vector<SuiteSample>& suite,
                             const std::vector<const SuiteSample*>& selected,
                             CalibrateOptions options) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool answers = options.criterion != engine::DepthCriterion::kKvSimilarity;
  if (options.bin_pct == 0) options.bin_pct = answers ? 10 : 5;
  CheckCommon(options);
  CalibrateReport out;
  out.options = std::move(options);
  out = answers ? RunAnswers(lm, suite, selected, std::move(out))
                : RunKv(lm, selected, std::move(out));
  const CalibrateOptions& o = out.options;
  engine::CalibrationSettings cs{o.suite_name, static_cast<int>(out.samples),
                                 o.base.sampler.gen_length};
  if (answers) {
    cs.steps = o.base.sampler.steps;
    cs.block_length = o.base.sampler.block_length;
    cs.refresh = o.base.refresh_interval;
  }
  out.table.set_calibrated_with(std::move(cs));
  out.table.set_model_shape(lm.model().config().d_model, lm.model().config().n_vocab);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace bicache::harness
