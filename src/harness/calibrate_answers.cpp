#include "harness/calibrate_answers.h"

#include <chrono>
#include <cmath>
#include <map>

#include "harness/eval.h"
#include "util/field_error.h"

namespace bicache::harness {
namespace {

void CheckOptions(const AnswerCalibrationOptions& o) {
  if (!(o.min_agreement > 0 && o.min_agreement <= 1))
    throw FieldError(ErrorKind::kInvalidArgument, "{min_agreement} must be in (0, 1]");
  if (o.bin_pct < 1 || o.bin_pct > 50)
    throw FieldError(ErrorKind::kInvalidArgument, "{bin} must be in [1, 50] percent");
  if (o.min_bin_samples < 1)
    throw FieldError(ErrorKind::kInvalidArgument, "{min_bin_samples} must be >= 1");
  if (o.batch < 1) throw FieldError(ErrorKind::kInvalidArgument, "{batch} must be >= 1");
}

// Keeps the samples that have a prefix and fit the context; ratios[i] for kept sample i.
std::vector<const SuiteSample*> Runnable(const engine::LoadedModel& lm,
                                         const std::vector<const SuiteSample*>& selected,
                                         int gen_length, AnswerCalibration& out,
                                         std::vector<double>& ratios) {
  const int context = lm.model().config().context_length;
  std::vector<const SuiteSample*> kept;
  for (const SuiteSample* s : selected) {
    const engine::Prompt p = SamplePrompt(lm, *s);
    const int total = static_cast<int>(p.tokens.size()) + gen_length;
    if (p.prefix_len <= 0) {
      out.skipped_no_prefix++;
    } else if (total > context) {
      out.skipped_too_long++;
    } else {
      kept.push_back(s);
      ratios.push_back(static_cast<double>(p.prefix_len) / total);
    }
  }
  if (kept.empty()) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{suite}: no selected sample has a prefix and fits the context (" +
                         std::to_string(context) + " tokens) with {gen_length} " +
                         std::to_string(gen_length));
  }
  return kept;
}

}  // namespace

AnswerCalibration CalibrateByAnswers(const engine::LoadedModel& lm,
                                     const std::vector<SuiteSample>& suite,
                                     const std::vector<const SuiteSample*>& selected,
                                     AnswerCalibrationOptions o) {
  CheckOptions(o);
  const auto t0 = std::chrono::steady_clock::now();
  const int L = lm.model().config().n_layer;
  AnswerCalibration out;
  std::vector<double> ratios;
  const std::vector<const SuiteSample*> kept =
      Runnable(lm, selected, o.base.sampler.gen_length, out, ratios);
  out.samples = kept.size();

  // answers[d][i], correct[d][i]: sample i served at depth d.
  std::vector<std::vector<std::vector<int32_t>>> answers(L + 1);
  std::vector<std::vector<bool>> correct(L + 1);
  for (int d = 0; d <= L; ++d) {
    EvalOptions eo;
    eo.batch = o.batch;
    eo.base = o.base;
    eo.base.cache = engine::ParseCacheMode(d == 0 ? "none" : "fixed:" + std::to_string(d));
    eo.cache_budget_mb = o.cache_budget_mb;
    if (o.progress)
      eo.progress = [&, d](int done, size_t n, const SuiteSample&, int) { o.progress(d, done, n); };
    const EvalReport r = RunEval(std::move(eo), lm, suite, kept);
    for (const EvalOutcome& x : r.outcomes) {
      answers[d].push_back(x.r.answer);
      correct[d].push_back(x.correct);
    }
  }

  std::map<int, engine::CalibrationBin> bins;
  out.agreement.assign(L + 1, 0.0);
  out.accuracy.assign(L + 1, 0.0);
  for (size_t i = 0; i < kept.size(); ++i) {
    const int pct = static_cast<int>(std::floor(ratios[i] * 100.0 / o.bin_pct)) * o.bin_pct;
    engine::CalibrationBin& b = bins[pct];
    b.ratio_pct = pct;
    b.samples++;
    b.agreement.resize(L + 1, 0.0);
    b.accuracy.resize(L + 1, 0.0);
    for (int d = 0; d <= L; ++d) {
      const double agree = answers[d][i] == answers[0][i] ? 1.0 : 0.0;
      b.agreement[d] += agree;
      b.accuracy[d] += correct[d][i] ? 1.0 : 0.0;
      out.agreement[d] += agree / kept.size();
      out.accuracy[d] += (correct[d][i] ? 1.0 : 0.0) / kept.size();
    }
  }
  std::vector<engine::CalibrationBin> list;
  for (auto& [pct, b] : bins) {
    for (double& v : b.agreement) v /= b.samples;
    for (double& v : b.accuracy) v /= b.samples;
    list.push_back(std::move(b));
  }
  out.table =
      engine::DepthTable::FromAnswerBins(std::move(list), o.min_agreement, L, o.min_bin_samples);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace bicache::harness
