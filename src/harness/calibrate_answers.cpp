#include "harness/calibrate_answers.h"

#include <map>

#include "harness/calibrate.h"
#include "harness/eval.h"
#include "harness/paired_stats.h"
#include "util/field_error.h"

namespace bicache::harness {
namespace {

// Answers (token ids) and correctness of `samples` served at reuse depth d (0 = none).
EvalReport RunDepth(const engine::LoadedModel& lm, const std::vector<SuiteSample>& suite,
                    const std::vector<const SuiteSample*>& samples, int d,
                    const AnswerCalibrationOptions& o) {
  EvalOptions eo;
  eo.batch = o.batch;
  eo.base = o.base;
  eo.base.cache = engine::ParseCacheMode(d == 0 ? "none" : "fixed:" + std::to_string(d));
  eo.cache_budget_mb = o.cache_budget_mb;
  if (o.progress)
    eo.progress = [&, d](int done, size_t n, const SuiteSample&, int) { o.progress(d, done, n); };
  return RunEval(std::move(eo), lm, suite, samples);
}

}  // namespace

void CheckAnswerCalibrationOptions(const AnswerCalibrationOptions& o) {
  if (!(o.min_agreement > 0 && o.min_agreement <= 1))
    throw FieldError(ErrorKind::kInvalidArgument, "{min_agreement} must be in (0, 1]");
  if (!(o.max_drop > 0 && o.max_drop <= 100))
    throw FieldError(ErrorKind::kInvalidArgument, "{max_drop} must be in (0, 100] points");
  if (o.criterion == engine::DepthCriterion::kKvSimilarity)
    throw FieldError(ErrorKind::kInvalidArgument, "{criterion} must be answers or accuracy here");
  CheckRatioBinPct(o.bin_pct);
  if (o.min_bin_samples < 1)
    throw FieldError(ErrorKind::kInvalidArgument, "{min_bin_samples} must be >= 1");
  if (o.batch < 1) throw FieldError(ErrorKind::kInvalidArgument, "{batch} must be >= 1");
}

AnswerCalibration CalibrateByAnswers(const engine::LoadedModel& lm,
                                     const std::vector<SuiteSample>& suite,
                                     const std::vector<const SuiteSample*>& kept,
                                     const std::vector<double>& ratios,
                                     AnswerCalibrationOptions o) {
  CheckAnswerCalibrationOptions(o);
  const int L = lm.model().config().n_layer;
  const bool accuracy = o.criterion == engine::DepthCriterion::kAccuracy;
  const double threshold = accuracy ? o.max_drop : o.min_agreement;
  AnswerCalibration out;

  // Bins of kept samples; members[pct] = indices into kept.
  std::map<int, engine::CalibrationBin> bins;
  std::map<int, std::vector<size_t>> members;
  for (size_t i = 0; i < kept.size(); ++i) {
    const int pct = RatioBinPct(ratios[i], o.bin_pct);
    bins[pct].ratio_pct = pct;
    bins[pct].samples++;
    members[pct].push_back(i);
  }

  // Depth 0 (none) for every sample: the reference answers.
  const EvalReport none = RunDepth(lm, suite, kept, 0, o);
  out.runs = kept.size();
  std::vector<std::vector<int32_t>> ref(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    ref[i] = none.outcomes[i].r.answer;
    out.none_accuracy += (none.outcomes[i].correct ? 1.0 : 0.0) / kept.size();
  }
  for (auto& [pct, b] : bins) {
    b.agreement = {1.0};
    double right = 0;
    for (size_t i : members[pct]) right += none.outcomes[i].correct ? 1.0 : 0.0;
    b.accuracy = {right / b.samples};
    if (accuracy) b.accuracy_low = {0.0};
  }

  // Depth d runs only the bins whose depths 1..d-1 all held (a bin's depth is the leading run of
  // safe depths), and only bins large enough to be kept.
  for (int d = 1; d <= L; ++d) {
    std::vector<const SuiteSample*> run;
    std::vector<std::pair<int, size_t>> where;  // (bin, index into kept) per run entry
    for (auto& [pct, b] : bins) {
      if (b.samples < o.min_bin_samples) continue;
      if (engine::DepthTable::CriterionBinDepth(b, o.criterion, threshold, L) != d - 1) continue;
      for (size_t i : members[pct]) {
        run.push_back(kept[i]);
        where.emplace_back(pct, i);
      }
    }
    if (run.empty()) break;
    const EvalReport r = RunDepth(lm, suite, run, d, o);
    out.runs += run.size();
    std::map<int, std::pair<double, double>> tally;  // bin -> (agreeing, right)
    std::map<int, PairedCounts> pairs;               // bin -> none (A) against depth d (B)
    for (size_t k = 0; k < run.size(); ++k) {
      auto& [agree, right] = tally[where[k].first];
      agree += r.outcomes[k].r.answer == ref[where[k].second] ? 1.0 : 0.0;
      right += r.outcomes[k].correct ? 1.0 : 0.0;
      const bool a = none.outcomes[where[k].second].correct, b = r.outcomes[k].correct;
      PairedCounts& c = pairs[where[k].first];
      (a ? (b ? c.both : c.a_only) : (b ? c.b_only : c.neither))++;
    }
    for (auto& [pct, t] : tally) {
      engine::CalibrationBin& b = bins[pct];
      b.agreement.push_back(t.first / b.samples);
      b.accuracy.push_back(t.second / b.samples);
      if (accuracy) b.accuracy_low.push_back(NewcombePairedInterval(pairs[pct]).lo);
    }
  }

  std::vector<engine::CalibrationBin> list;
  for (auto& [pct, b] : bins) list.push_back(std::move(b));
  out.table = engine::DepthTable::FromAnswerBins(std::move(list), threshold, L, o.min_bin_samples,
                                                 o.criterion);
  return out;
}

}  // namespace bicache::harness
