// Calibration of the BiCache depth table by answers (issue 34's criterion; the K/V-similarity
// one is harness/calibrate.h). Every selected suite sample is served with `none` (depth 0), then
// with `fixed:1`, `fixed:2`, ... and otherwise the same sampler, seed included. Per ratio bin it
// records how many answers equal none's token for token (agreement) and how many are right
// (accuracy); engine::DepthTable::FromAnswerBins picks each bin's depth and the envelope.
// A bin's depth is the leading run of safe depths, so a bin stops at its first unsafe depth (its
// curve ends there) and bins under min_bin_samples stop at depth 0: the cost is one `none` run of
// every sample plus, per bin, (its depth + 1) runs of its samples, at most (n_layer + 1) runs.
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
  size_t samples = 0;         // samples that had a prefix and fit the context
  int skipped_no_prefix = 0;  // skipped: no shared prefix
  int skipped_too_long = 0;   // skipped: prompt + canvas over the context
  double none_accuracy = 0;   // depth 0 over every sample
  size_t runs = 0;            // requests generated, all depths
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
