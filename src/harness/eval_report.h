// `bicache eval`'s output: the text table and the JSON document of an EvalReport.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/eval.h"

namespace bicache::harness {

// Aggregates. Speed and cache figures are over the samples that ran (errors have none).
struct EvalSummary {
  struct Tally {
    int n = 0, correct = 0;
    double accuracy() const { return n > 0 ? static_cast<double>(correct) / n : 0.0; }
  };
  std::map<std::string, Tally> by_family;
  Tally all;
  int ran = 0, errors = 0, hits = 0;
  double steps = 0, forwards = 0, depth = 0, ratio = 0, seconds = 0, answer_tokens = 0;
  double mean(double x) const { return ran > 0 ? x / ran : 0.0; }
  double tokens_per_s() const { return seconds > 0 ? answer_tokens / seconds : 0.0; }
};

EvalSummary SummarizeEval(const EvalReport& report);
// The human-readable report on stdout.
void PrintEvalText(const EvalReport& report, const EvalSummary& summary);
// Per-sample results, the summary and the settings. Accuracy comes with Wilson 95% intervals
// ("overall_ci95", "accuracy_ci95"); the per-sample "correct" flags let two runs be paired later.
nlohmann::json EvalJson(const EvalReport& report, const EvalSummary& summary);

}  // namespace bicache::harness
