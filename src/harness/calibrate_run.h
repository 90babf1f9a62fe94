// `bicache calibrate`'s run, either criterion: builds the samples a served request would run from
// a suite, measures them (harness/calibrate.h: prefix K/V similarity; harness/calibrate_answers.h:
// answers against `none`) and returns the depth table with what was skipped. The CLI
// (cli/cmd_calibrate.cpp) turns flags into CalibrateOptions; harness/calibrate_report.h prints.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/depth_table.h"
#include "engine/loaded_model.h"
#include "engine/request.h"
#include "harness/suite.h"

namespace bicache::harness {

struct CalibrateOptions {
  engine::DepthCriterion criterion = engine::DepthCriterion::kKvSimilarity;
  double threshold = 0.97;      // kv_similarity: minimum mean similarity of every reused layer
  double min_agreement = 0.98;  // answers: minimum agreement with none at every depth up to d
  double max_drop = 1.0;        // accuracy: most points lost against none at every depth up to d
  int bin_pct = 0;              // ratio bin width in percent (0 = 5 for kv, 10 for answers)
  int min_bin_samples = 20;     // answers: smaller bins are dropped
  int batch = 8;                // answers: requests stepping together
  engine::RequestOptions base;  // sampler settings; kv uses gen_length (the canvas) only
  std::string suite_name;       // recorded in the table (DepthTable::calibrated_with)
  // Called after each measured sample: (phase, done, total); phase is "kv" or "depth D".
  std::function<void(const std::string&, size_t, size_t)> progress;
};

struct CalibrateReport {
  CalibrateOptions options;  // bin_pct resolved
  engine::DepthTable table;
  size_t samples = 0;  // measured (have a prefix and fit the context)
  int skipped_no_prefix = 0, skipped_too_long = 0;
  // answers only: none's accuracy over every sample, requests generated (all depths).
  double none_accuracy = 0;
  size_t runs = 0;
  double seconds = 0;
};

// `selected` points into `suite` (harness::SelectSamples). Throws FieldError(kInvalidArgument)
// naming {threshold}, {min_agreement}, {bin}, {min_bin_samples}, {batch}, {gen_length} or {suite}.
CalibrateReport RunCalibrate(const engine::LoadedModel& model,
                             const std::vector<SuiteSample>& suite,
                             const std::vector<const SuiteSample*>& selected,
                             CalibrateOptions options);

}  // namespace bicache::harness
