// `bicache eval`'s run: every selected suite sample through ONE engine, up to `batch` of them
// stepping together through Engine::StepBatch, scored by IsCorrect. The CLI (cli/cmd_eval.cpp)
// turns flags into EvalOptions; harness/eval_report.h prints and serialises the result.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "harness/suite.h"

namespace bicache::harness {

struct EvalOptions {
  std::string suite;                  // path, reported as given
  int limit = 0;                      // first N samples of each family (0 = all)
  std::vector<std::string> families;  // empty = all
  int batch = 1;                      // requests stepping together
  engine::RequestOptions base;        // sampler, cache mode, refresh; prompt left empty
  double cache_budget_mb = 0;
  double audit_rate = 0;
  // Called after each sample finishes (done so far, total, the sample, correct so far).
  std::function<void(int, size_t, const SuiteSample&, int)> progress;
};

struct EvalOutcome {
  const SuiteSample* sample = nullptr;
  std::string answer, error;  // error: the sample did not fit the context (scored wrong)
  bool correct = false;
  engine::RequestResult r;
};

struct EvalReport {
  EvalOptions options;                       // base completed with the model's stop ids and mask id
  std::string model_path, depth_table_path;  // depth_table_path empty without a table
  bool have_depth_table = false;
  int context_length = 0;
  std::vector<std::string> family_order;  // the whole suite's, first-appearance order
  std::vector<EvalOutcome> outcomes;      // one per selected sample, in selection order
  double wall_seconds = 0;
};

// The samples to run, in file order: the first `limit` of each family (0 = all), restricted to
// `families` when given (each must exist in the suite, else Error(kInvalidArgument)).
std::vector<const SuiteSample*> SelectSamples(const std::vector<SuiteSample>& suite, int limit,
                                              const std::vector<std::string>& families);

// Runs `selected` (pointers into `suite`) on `model`. Throws Error(kInvalidArgument) on invalid
// sampler settings (before any sample runs).
EvalReport RunEval(EvalOptions options, const engine::LoadedModel& model,
                   const std::vector<SuiteSample>& suite,
                   const std::vector<const SuiteSample*>& selected);

// Error(kInvalidArgument) when every selected sample was too long for the model's context: the
// run measured nothing.
void CheckSomeSampleFits(const EvalReport& report);

}  // namespace bicache::harness
