#include "harness/suite.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "util/error.h"
#include "util/exe_path.h"

namespace bicache::harness {
namespace {

std::string Trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// The trimmed text after the last "####", or nullopt when there is none.
std::optional<std::string> AfterMarker(const std::string& s) {
  const size_t at = s.rfind("####");
  if (at == std::string::npos) return std::nullopt;
  return Trim(s.substr(at + 4));
}

// The integer after the last "####", or "" when there is none.
std::string FinalNumber(const std::string& s) {
  const std::string rest = AfterMarker(s).value_or("");
  size_t n = 0;
  if (n < rest.size() && rest[n] == '-') ++n;
  while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
  return rest.substr(0, n);
}

}  // namespace

std::vector<SuiteSample> LoadSuite(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(ErrorKind::kIo, "cannot open suite '" + path + "'");
  std::vector<SuiteSample> out;
  std::string line;
  for (int lineno = 1; std::getline(f, line); ++lineno) {
    if (Trim(line).empty()) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw Error(ErrorKind::kFormat, where + ": not JSON: " + e.what());
    }
    if (!j.is_object()) throw Error(ErrorKind::kFormat, where + ": a sample must be a JSON object");
    auto field = [&](const char* key, bool required) -> std::string {
      if (!j.contains(key)) {
        if (required) throw Error(ErrorKind::kFormat, where + ": missing field '" + key + "'");
        return "";
      }
      if (!j[key].is_string())
        throw Error(ErrorKind::kFormat, where + ": field '" + key + "' must be a string");
      return j[key].get<std::string>();
    };
    SuiteSample s;
    s.prefix = field("prefix", true);
    s.prompt = field("prompt", true);
    s.answer = field("answer", false);
    s.family = field("family", false);
    if (s.family.empty()) s.family = "default";
    s.id = field("id", false);
    if (s.id.empty()) s.id = std::to_string(out.size());
    s.prefix_id = field("prefix_id", false);
    out.push_back(std::move(s));
  }
  if (out.empty()) throw Error(ErrorKind::kFormat, "suite '" + path + "' has no samples");
  return out;
}

std::string SuiteRoot() {
  if (const char* env = std::getenv("BICACHE_SUITE_ROOT"); env && *env) return env;
  const std::string found = DirAboveExecutableHolding("tests/data/suite");
  return found.empty() ? "." : found;
}

std::string DefaultSuitePath() {
  return SuiteRoot() + "/tests/data/suite/heldout.jsonl";
}

std::string LargeHeldoutSuitePath() {
  return SuiteRoot() + "/tests/data/suite/heldout_large.jsonl";
}

std::string CalibrationSuitePath() {
  return SuiteRoot() + "/tests/data/suite/calibration.jsonl";
}

std::string SpreadHeldoutSuitePath() {
  return SuiteRoot() + "/tests/data/suite/heldout_spread.jsonl";
}

std::string ResolveSuitePath(const std::string& name_or_path) {
  if (name_or_path == "heldout") return DefaultSuitePath();
  if (name_or_path == "heldout-large") return LargeHeldoutSuitePath();
  if (name_or_path == "calibration") return CalibrationSuitePath();
  if (name_or_path == "heldout-spread") return SpreadHeldoutSuitePath();
  return name_or_path;
}

std::string SuiteDisplayName(const std::string& path) {
  const std::string root = SuiteRoot() + "/";
  return path.rfind(root, 0) == 0 ? path.substr(root.size()) : path;
}

engine::Prompt SamplePrompt(const engine::LoadedModel& model, const SuiteSample& sample) {
  return model.ChatPrompt({{"system", sample.prefix}, {"user", sample.prompt}});
}

bool IsCorrect(const SuiteSample& sample, const std::string& answer_text) {
  if (sample.family == "arith") {
    const std::string want = FinalNumber(sample.answer), got = FinalNumber(answer_text);
    return !want.empty() && want == got;
  }
  // A worked answer ("rule T. #### OUTPUT", T the rule's letter): the text after "####" is scored.
  if (const auto want = AfterMarker(sample.answer)) return AfterMarker(answer_text) == want;
  return Trim(answer_text) == Trim(sample.answer);
}

std::vector<std::string> Families(const std::vector<SuiteSample>& samples) {
  std::vector<std::string> fams;
  for (const auto& s : samples) {
    if (std::find(fams.begin(), fams.end(), s.family) == fams.end()) fams.push_back(s.family);
  }
  return fams;
}

}  // namespace bicache::harness
