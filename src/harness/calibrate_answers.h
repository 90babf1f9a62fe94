// Calibration of the BiCache depth table by answers (issue 34's criterion; the K/V-similarity
// one is harness/calibrate.h). Every selected suite sample runs once per depth d = 0..n_layer,
// served with `fixed:d` (d = 0 is `none`) and otherwise the same sampler, seed included. Per
// ratio bin it records how many answers equal none's token for token (agreement) and how many are
// right (accuracy); engine::DepthTable::FromAnswerBins picks each bin's depth and the envelope.
// Cost: (n_layer + 1) runs of the selected samples; prefix entries are built once per prefix and
// depth.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/depth_table.h"
#include "engine/loaded_model.h"
#include "engine/request.h"
#include "harness/suite.h"

namespace bicache::harness {

struct AnswerCalibrationOptions {
  engine::RequestOptions base;  // sampler settings (gen_length, steps, ...); cache is ignored
  double min_agreement = 0.98;  // a depth is safe while agreement with none stays >= this
  int bin_pct = 10;             // ratio bins of integer percent
  int min_bin_samples = 20;     // bins with fewer samples are dropped (see FromAnswerBins)
  int batch = 8;                // requests stepping together (answers do not depend on it)
  double cache_budget_mb = 0;   // 0 = the engine's default
  // After each request: (depth being run, requests done at that depth, requests per depth).
  std::function<void(int, size_t, size_t)> progress;
};

struct AnswerCalibration {
  engine::DepthTable table;
  size_t samples = 0;             // samples that had a prefix and fit the context
  int skipped_no_prefix = 0;      // skipped: no shared prefix
  int skipped_too_long = 0;       // skipped: prompt + canvas over the context
  std::vector<double> agreement;  // [n_layer + 1] over every sample, index = depth
  std::vector<double> accuracy;   // [n_layer + 1]
  double seconds = 0;
};

// Throws FieldError(kInvalidArgument) naming {min_agreement}, {bin}, {min_bin_samples}, {batch}
// when out of range, or when no sample has a prefix and fits the context.
// `selected` points into `suite` (harness::SelectSamples).
AnswerCalibration CalibrateByAnswers(const engine::LoadedModel& model,
                                     const std::vector<SuiteSample>& suite,
                                     const std::vector<const SuiteSample*>& selected,
                                     AnswerCalibrationOptions options);

}  // namespace bicache::harness
