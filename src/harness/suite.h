// The task suite (tools/train/suite.py writes it): JSONL samples of shared prefix + request prompt
// + reference answer, grouped by prefix. Used by `eval`, `calibrate` and `bench`.
#pragma once

#include <string>
#include <vector>

#include "engine/loaded_model.h"

namespace bicache::harness {

struct SuiteSample {
  std::string id, family, prefix, prompt, answer, prefix_id;
};

// Reads a JSONL file; throws Error(kIo) / Error(kFormat) naming the path, the line and the field.
std::vector<SuiteSample> LoadSuite(const std::string& path);
// The embedded model's committed held-out suite.
std::string DefaultSuitePath();
// The chat prompt of a sample: system = its prefix, user = its prompt; the prefix boundary is
// everything before the user turn.
engine::Prompt SamplePrompt(const engine::LoadedModel& model, const SuiteSample& sample);
// Exact match after trimming; `arith` compares the integer after the last "####"; a worked answer
// of another family (one holding "####", e.g. rule's "rule T. #### OUTPUT") compares the trimmed
// text after the last "####", so the rationale before it is not scored.
bool IsCorrect(const SuiteSample& sample, const std::string& answer_text);
// Families in first-appearance order.
std::vector<std::string> Families(const std::vector<SuiteSample>& samples);

}  // namespace bicache::harness
