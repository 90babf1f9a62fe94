// The committed large held-out and calibration splits (tools/train/suite.py --heldout-large,
// --calibration) as `bicache bench` sees them: `--suite` names resolve to them, and a slice of
// each (the first groups of every family, ratios from the embedded model's tokenizer as bench
// computes them) has every family in both ratio bands, groups of 4 requests, and long-prefix
// groups whose every request has r >= 0.85. tests/cli/suite_generator.sh checks the whole files.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "harness/bench_workload.h"
#include "harness/suite.h"

namespace bicache::harness {
namespace {

constexpr int kGenLength = 32;       // bench's default canvas
constexpr int kGroupsPerFamily = 8;  // the slice: 3 x 8 groups x 4 requests = 96 requests

const engine::LoadedModel& EmbeddedModel() {
  static const auto lm =
      engine::LoadedModel::Load(std::string(BICACHE_SOURCE_DIR) + "/models/tiny-llada.gguf");
  return *lm;
}

// The first kGroupsPerFamily prefix groups of every family, in suite order.
std::vector<SuiteSample> Slice(const std::vector<SuiteSample>& suite) {
  std::map<std::string, std::vector<std::string>> groups;  // family -> prefix ids seen
  std::vector<SuiteSample> out;
  for (const SuiteSample& s : suite) {
    auto& seen = groups[s.family];
    if (seen.empty() || seen.back() != s.prefix_id) seen.push_back(s.prefix_id);
    if (static_cast<int>(seen.size()) <= kGroupsPerFamily) out.push_back(s);
  }
  return out;
}

// r = prefix tokens / (prompt tokens + canvas), as RunBench computes it.
std::vector<double> Ratios(const std::vector<SuiteSample>& samples) {
  std::vector<double> ratios;
  for (const SuiteSample& s : samples) {
    const engine::Prompt p = SamplePrompt(EmbeddedModel(), s);
    ratios.push_back(static_cast<double>(p.prefix_len) /
                     static_cast<double>(p.tokens.size() + kGenLength));
  }
  return ratios;
}

void ExpectBandsAndLongPrefixFamily(const std::string& path, size_t total) {
  SCOPED_TRACE(path);
  const std::vector<SuiteSample> suite = LoadSuite(path);
  EXPECT_EQ(suite.size(), total);
  EXPECT_EQ(Families(suite), (std::vector<std::string>{"docqa", "rule", "arith"}));
  const std::vector<SuiteSample> slice = Slice(suite);
  ASSERT_EQ(slice.size(), 3u * kGroupsPerFamily * 4);  // every group has 4 requests
  const std::vector<double> ratios = Ratios(slice);

  // The long-prefix family: prefix_id "<split>-<family>-long-NNN", every request r >= 0.85.
  std::map<std::string, int> long_groups;  // family -> groups
  for (size_t i = 0; i < slice.size(); ++i) {
    if (slice[i].prefix_id.find("-long-") == std::string::npos) continue;
    EXPECT_GE(ratios[i], 0.85) << slice[i].id;
    if (slice[i].id.ends_with("-0")) ++long_groups[slice[i].family];
  }
  for (const char* fam : {"docqa", "rule", "arith"}) EXPECT_GE(long_groups[fam], 1) << fam;

  // bench --ratio-band sweep over the slice: every group qualifies, half of them per band.
  WorkloadOptions o;
  o.band = RatioBand::kSweep;
  o.prefixes = static_cast<int>(slice.size()) / 4 / 2;
  const Workload w = BuildWorkload(slice, ratios, o);
  std::map<std::string, int> requests;
  std::map<std::string, std::vector<std::string>> families;
  for (const WorkloadGroup& g : w.groups) {
    requests[g.band] += static_cast<int>(g.samples.size());
    families[g.band].push_back(g.family);
  }
  EXPECT_EQ(requests["short"], static_cast<int>(slice.size()) / 2);
  EXPECT_EQ(requests["long"], static_cast<int>(slice.size()) / 2);
  for (const char* band : {"short", "long"}) {
    for (const char* fam : {"docqa", "rule", "arith"}) {
      EXPECT_NE(std::find(families[band].begin(), families[band].end(), fam), families[band].end())
          << band << " " << fam;
    }
  }
}

TEST(SuiteSplits, NamesResolveToTheCommittedFiles) {
  EXPECT_EQ(ResolveSuitePath("heldout"), DefaultSuitePath());
  EXPECT_EQ(ResolveSuitePath("heldout-large"), LargeHeldoutSuitePath());
  EXPECT_EQ(ResolveSuitePath("calibration"), CalibrationSuitePath());
  EXPECT_EQ(ResolveSuitePath("my/suite.jsonl"), "my/suite.jsonl");
}

TEST(SuiteSplits, LargeHeldoutSliceHasBothBandsAndTheLongPrefixFamily) {
  ExpectBandsAndLongPrefixFamily(LargeHeldoutSuitePath(), 2160);
}

TEST(SuiteSplits, CalibrationSliceHasBothBandsAndTheLongPrefixFamily) {
  ExpectBandsAndLongPrefixFamily(CalibrationSuitePath(), 720);
}

TEST(SuiteSplits, CalibrationSharesNoPrefixWithTheHeldOutSplits) {
  const std::vector<SuiteSample> calib = LoadSuite(CalibrationSuitePath());
  std::vector<std::string> held;
  for (const std::string& path : {DefaultSuitePath(), LargeHeldoutSuitePath()}) {
    for (const SuiteSample& s : LoadSuite(path)) held.push_back(s.prefix);
  }
  std::sort(held.begin(), held.end());
  for (const SuiteSample& s : calib) {
    EXPECT_FALSE(std::binary_search(held.begin(), held.end(), s.prefix)) << s.id;
  }
}

}  // namespace
}  // namespace bicache::harness
