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
  // kAnswers: a depth is safe while agreement with none stays >= min_agreement; kAccuracy (the
  // BiCache paper's criterion): while accuracy loses at most max_drop points against none and the
  // paired 95% interval's lower end stays >= -2 x max_drop points.
  engine::DepthCriterion criterion = engine::DepthCriterion::kAnswers;
  double min_agreement = 0.98;
  double max_drop = 1.0;
  int bin_pct = 10;            // ratio bins of integer percent
  int min_bin_samples = 20;    // bins with fewer samples are dropped (see FromAnswerBins)
  int batch = 8;               // requests stepping together (answers do not depend on it)
  double cache_budget_mb = 0;  // 0 = the engine's default
  // After each request: (depth being run, requests done at that depth, requests per depth).
  std::function<void(int, size_t, size_t)> progress;
};

struct AnswerCalibration {
  engine::DepthTable table;
  double none_accuracy = 0;  // depth 0 over every sample
  size_t runs = 0;           // requests generated, all depths
};

// Throws FieldError(kInvalidArgument) naming {min_agreement}, {max_drop}, {bin}, {min_bin_samples}
// or {batch}
// when out of range (CalibrateByAnswers checks too; RunCalibrate calls it before selecting).
void CheckAnswerCalibrationOptions(const AnswerCalibrationOptions& options);

// `samples` (pointers into `suite`, each with a prefix and fitting the context with the canvas:
// harness/calibrate_run.cpp selects them) and their prefix ratios, ratios[i] for samples[i].
// Throws as CheckAnswerCalibrationOptions.
AnswerCalibration CalibrateByAnswers(const engine::LoadedModel& model,
                                     const std::vector<SuiteSample>& suite,
                                     const std::vector<const SuiteSample*>& samples,
                                     const std::vector<double>& ratios,
                                     AnswerCalibrationOptions options);

}  // namespace bicache::harness
