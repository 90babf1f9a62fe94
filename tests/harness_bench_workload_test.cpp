#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "harness/bench_workload.h"
#include "util/error.h"

namespace bicache::harness {
namespace {

// A synthetic suite: `groups_per_family` prefix groups per family, `per_group` samples each,
// interleaved in the file the way a generated suite might be. Group g of family f has ratio
// (g + 1) / 10 + f / 100 so groups are distinct and ordered.
struct Fixture {
  std::vector<SuiteSample> suite;
  std::vector<double> ratios;
};

Fixture MakeSuite(int groups_per_family, int per_group) {
  Fixture fx;
  const char* fams[] = {"docqa", "rule", "arith"};
  for (int f = 0; f < 3; ++f) {
    for (int g = 0; g < groups_per_family; ++g) {
      for (int k = 0; k < per_group; ++k) {
        SuiteSample s;
        s.family = fams[f];
        s.prefix_id = std::string(fams[f]) + "-" + std::to_string(g);
        s.prefix = "prefix of " + s.prefix_id;
        s.prompt = "q" + std::to_string(k);
        s.id = s.prefix_id + "-" + std::to_string(k);
        fx.suite.push_back(s);
        fx.ratios.push_back((g + 1) / 10.0 + f / 100.0);
      }
    }
  }
  return fx;
}

TEST(BenchWorkload, PTimesMRequestsEachPrefixSharedByM) {
  Fixture fx = MakeSuite(4, 5);
  Workload w = BuildWorkload(fx.suite, fx.ratios, {.prefixes = 4, .per_prefix = 3});
  ASSERT_EQ(w.groups.size(), 4u);
  ASSERT_EQ(w.requests.size(), 12u);
  std::map<int, std::set<size_t>> per_group;
  std::set<size_t> all;
  for (const auto& r : w.requests) {
    per_group[r.group].insert(r.sample);
    all.insert(r.sample);
    // Every request of a group carries that group's prefix.
    EXPECT_EQ(fx.suite[r.sample].prefix, fx.suite[w.groups[r.group].samples[0]].prefix);
  }
  EXPECT_EQ(all.size(), 12u);  // no sample twice
  for (const auto& [g, s] : per_group) EXPECT_EQ(s.size(), 3u);
  // Distinct prefixes, spread over all three families.
  std::set<std::string> keys, fams;
  for (const auto& g : w.groups) {
    keys.insert(g.key);
    fams.insert(g.family);
  }
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_EQ(fams.size(), 3u);
}

TEST(BenchWorkload, InterleavedOrderSpreadsRequestsOfAPrefix) {
  Fixture fx = MakeSuite(2, 3);
  Workload w = BuildWorkload(fx.suite, fx.ratios, {.prefixes = 3, .per_prefix = 2});
  ASSERT_EQ(w.requests.size(), 6u);
  // A1 B1 C1 A2 B2 C2: the first round is every prefix's cold request.
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(w.requests[i].group, i % 3);
    EXPECT_EQ(w.requests[i].round, i / 3);
  }
}

TEST(BenchWorkload, GroupedOrderKeepsAPrefixTogether) {
  Fixture fx = MakeSuite(2, 3);
  Workload w = BuildWorkload(fx.suite, fx.ratios,
                             {.prefixes = 3, .per_prefix = 3, .order = RequestOrder::kGrouped});
  ASSERT_EQ(w.requests.size(), 9u);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(w.requests[i].group, i / 3);
    EXPECT_EQ(w.requests[i].round, i % 3);
  }
}

TEST(BenchWorkload, ZeroPrefixesTakesEveryQualifyingGroup) {
  Fixture fx = MakeSuite(3, 4);
  fx.ratios[0] = -1;  // docqa-0 keeps 3 usable samples: it qualifies for M = 3, not for M = 4
  Workload w = BuildWorkload(fx.suite, fx.ratios, {.prefixes = 0, .per_prefix = 4});
  EXPECT_EQ(w.groups.size(), 8u);
  EXPECT_EQ(w.requests.size(), 32u);
  std::set<std::string> keys;
  for (const auto& g : w.groups) keys.insert(g.key);
  EXPECT_EQ(keys.size(), 8u);
  EXPECT_EQ(keys.count("docqa-0"), 0u);
  EXPECT_EQ(BuildWorkload(fx.suite, fx.ratios, {.prefixes = 0, .per_prefix = 3}).groups.size(), 9u);
  // The default is every group with M = 4 usable requests.
  EXPECT_EQ(BuildWorkload(fx.suite, fx.ratios, {}).groups.size(), 8u);
  // Sweep with 0: every group of each half.
  Workload sw = BuildWorkload(fx.suite, fx.ratios,
                              {.prefixes = 0, .per_prefix = 3, .band = RatioBand::kSweep});
  EXPECT_EQ(sw.groups.size(), 9u);
}

TEST(BenchWorkload, SkipsUnusableSamplesAndSmallGroups) {
  Fixture fx = MakeSuite(2, 3);
  // Make one sample of docqa-0 unusable: that group then has only 2 usable samples.
  fx.ratios[0] = -1;
  fx.ratios[1] = std::nan("");
  Workload w = BuildWorkload(fx.suite, fx.ratios, {.prefixes = 5, .per_prefix = 2});
  for (const auto& r : w.requests) EXPECT_GE(fx.ratios[r.sample], 0);
  EXPECT_THROW(BuildWorkload(fx.suite, fx.ratios, {.prefixes = 6, .per_prefix = 2}), Error);
  EXPECT_THROW(BuildWorkload(fx.suite, fx.ratios, {.prefixes = 1, .per_prefix = 4}), Error);
  EXPECT_THROW(BuildWorkload(fx.suite, fx.ratios, {.prefixes = -1, .per_prefix = 1}), Error);
  EXPECT_THROW(BuildWorkload(fx.suite, fx.ratios, {.prefixes = 0, .per_prefix = 4}),
               Error);  // no group has 4
  std::vector<double> short_list(3, 0.5);
  EXPECT_THROW(BuildWorkload(fx.suite, short_list, {}), Error);
}

TEST(BenchWorkload, RatioBandsSplitAtTheMedian) {
  Fixture fx = MakeSuite(4, 2);
  Workload s = BuildWorkload(fx.suite, fx.ratios,
                             {.prefixes = 3, .per_prefix = 2, .band = RatioBand::kShort});
  Workload l = BuildWorkload(fx.suite, fx.ratios,
                             {.prefixes = 3, .per_prefix = 2, .band = RatioBand::kLong});
  double max_short = 0, min_long = 1;
  for (const auto& g : s.groups) {
    max_short = std::max(max_short, g.ratio);
    EXPECT_EQ(g.band, "short");
  }
  for (const auto& g : l.groups) {
    min_long = std::min(min_long, g.ratio);
    EXPECT_EQ(g.band, "long");
  }
  EXPECT_LT(max_short, min_long);

  Workload sw = BuildWorkload(fx.suite, fx.ratios,
                              {.prefixes = 2, .per_prefix = 2, .band = RatioBand::kSweep});
  ASSERT_EQ(sw.groups.size(), 4u);
  EXPECT_EQ(sw.requests.size(), 8u);
  int shorts = 0;
  for (const auto& g : sw.groups) shorts += g.band == "short";
  EXPECT_EQ(shorts, 2);
}

TEST(BenchWorkload, GroupsWithoutPrefixIdAreKeyedByText) {
  Fixture fx = MakeSuite(2, 2);
  for (auto& s : fx.suite) s.prefix_id.clear();
  Workload w = BuildWorkload(fx.suite, fx.ratios, {.prefixes = 6, .per_prefix = 2});
  EXPECT_EQ(w.groups.size(), 6u);
}

TEST(BenchWorkload, ParsesFlags) {
  EXPECT_EQ(ParseRequestOrder("grouped"), RequestOrder::kGrouped);
  EXPECT_EQ(ParseRatioBand("sweep"), RatioBand::kSweep);
  EXPECT_THROW(ParseRequestOrder("random"), Error);
  EXPECT_THROW(ParseRatioBand("medium"), Error);
}

}  // namespace
}  // namespace bicache::harness
