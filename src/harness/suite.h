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
// The directory the committed splits are found under (<root>/tests/data/suite/):
// $BICACHE_SUITE_ROOT when set, else the nearest directory above the executable that holds
// tests/data/suite (a build inside the checkout), else "." (the current directory).
std::string SuiteRoot();
// The embedded model's committed held-out suite (300 requests, tests/data/suite/heldout.jsonl).
std::string DefaultSuitePath();
// The large held-out split (2,160 requests, half of them in each ratio band, ~35% of the groups
// long-prefix with r >= 0.85; tools/train/suite.py --heldout-large).
std::string LargeHeldoutSuitePath();
// The calibration split (720 requests, no prefix shared with either held-out split).
std::string CalibrationSuitePath();
// tests/data/suite/heldout_spread.jsonl: 2,160 held-out requests whose prefix ratios spread
// evenly over 0.50-0.95 (tools/train/suite.py --heldout-spread), as chat traffic has them.
std::string SpreadHeldoutSuitePath();
// What a `--suite` value names: "heldout", "heldout-large" and "calibration" the committed splits
// (their paths); any other text is a path, returned as is.
std::string ResolveSuitePath(const std::string& name_or_path);
// A suite path as a record shows it: relative to SuiteRoot() when inside it (the committed
// splits: "tests/data/suite/calibration.jsonl"), else as given.
std::string SuiteDisplayName(const std::string& path);
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
