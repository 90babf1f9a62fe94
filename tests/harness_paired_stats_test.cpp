// harness/paired_stats: the intervals and p-values bench and eval print next to accuracy,
// against values worked by hand (binomial sums) and published examples.
#include "harness/paired_stats.h"

#include <gtest/gtest.h>

#include <vector>

namespace bicache::harness {
namespace {

TEST(HarnessPairedStats, WilsonMatchesPublishedAndEdgeValues) {
  // Newcombe (1998), single proportion: 81/263 -> 0.2553 to 0.3662.
  Interval w = WilsonInterval(81, 263);
  EXPECT_NEAR(w.lo, 0.255289, 1e-6);
  EXPECT_NEAR(w.hi, 0.366210, 1e-6);
  // 0 of 10: [0, z^2 / (n + z^2)]; all of 10 mirrors it.
  w = WilsonInterval(0, 10);
  EXPECT_EQ(w.lo, 0.0);
  EXPECT_NEAR(w.hi, 0.277533, 1e-6);
  w = WilsonInterval(10, 10);
  EXPECT_NEAR(w.lo, 0.722467, 1e-6);
  EXPECT_EQ(w.hi, 1.0);
  w = WilsonInterval(5, 10);
  EXPECT_NEAR(w.lo, 0.236593, 1e-6);
  EXPECT_NEAR(w.hi, 0.763407, 1e-6);
  // Nothing measured: nothing known.
  w = WilsonInterval(0, 0);
  EXPECT_EQ(w.lo, 0.0);
  EXPECT_EQ(w.hi, 1.0);
}

TEST(HarnessPairedStats, McNemarExactIsTheBinomialTestOnDiscordantPairs) {
  EXPECT_EQ(McNemarExactP(0, 0), 1.0);  // no discordant pairs: no evidence
  EXPECT_EQ(McNemarExactP(1, 0), 1.0);
  EXPECT_EQ(McNemarExactP(3, 3), 1.0);
  EXPECT_NEAR(McNemarExactP(5, 0), 2.0 / 32, 1e-12);
  EXPECT_NEAR(McNemarExactP(6, 1), 2.0 * (1 + 7) / 128, 1e-12);
  EXPECT_NEAR(McNemarExactP(10, 2), 2.0 * (1 + 12 + 66) / 4096, 1e-12);
  EXPECT_NEAR(McNemarExactP(2, 9), 0.06542969, 1e-8);
  EXPECT_EQ(McNemarExactP(2, 9), McNemarExactP(9, 2));
  EXPECT_NEAR(McNemarExactP(60, 40), 0.05688793, 1e-8);
  // Thousands of pairs stay finite (log space) and tiny when lopsided.
  const double p = McNemarExactP(1500, 1200);
  EXPECT_GT(p, 0.0);
  EXPECT_LT(p, 1e-7);
  EXPECT_NEAR(McNemarExactP(2000, 2000), 1.0, 1e-12);
}

TEST(HarnessPairedStats, NewcombeIntervalMatchesTheWorkedExample) {
  // Altman et al., Statistics with Confidence (2000), table 6.2: 14 both, 5 and 0 discordant,
  // 22 neither -> 0.0115 to 0.2265 around 5/41.
  PairedComparison c = ComparePaired({14, 5, 0, 22});
  EXPECT_EQ(c.n, 41);
  EXPECT_NEAR(c.delta, 5.0 / 41, 1e-12);
  EXPECT_NEAR(c.ci95.lo, 0.011483, 1e-6);
  EXPECT_NEAR(c.ci95.hi, 0.226493, 1e-6);
  EXPECT_NEAR(c.mcnemar_p, 0.0625, 1e-12);
  // Losses: B right where A was wrong twice, wrong where A was right 9 times.
  c = ComparePaired({12, 2, 9, 21});
  EXPECT_NEAR(c.accuracy_a, 21.0 / 44, 1e-12);
  EXPECT_NEAR(c.accuracy_b, 14.0 / 44, 1e-12);
  EXPECT_NEAR(c.delta, -7.0 / 44, 1e-12);
  EXPECT_NEAR(c.ci95.lo, -0.295372, 1e-6);
  EXPECT_NEAR(c.ci95.hi, -0.011243, 1e-6);
}

TEST(HarnessPairedStats, IdenticalOutcomesGiveASymmetricIntervalAroundZero) {
  // 40 requests, no discordant pair: Δ = 0 but the interval still reflects n (it narrows as n
  // grows) rather than collapsing to a point.
  const PairedComparison small = ComparePaired({30, 0, 0, 10});
  EXPECT_EQ(small.delta, 0.0);
  EXPECT_EQ(small.mcnemar_p, 1.0);
  EXPECT_NEAR(small.ci95.lo, -0.064109, 1e-6);
  EXPECT_NEAR(small.ci95.hi, 0.064109, 1e-6);
  const PairedComparison big = ComparePaired({1500, 0, 0, 500});
  EXPECT_LT(big.ci95.hi - big.ci95.lo, small.ci95.hi - small.ci95.lo);
  EXPECT_GT(big.ci95.lo, -0.01);  // 2,000 agreeing requests resolve a 1-point loss
}

TEST(HarnessPairedStats, IntervalAlwaysContainsTheEstimateAndStaysInRange) {
  for (int both = 0; both <= 6; ++both)
    for (int bo = 0; bo <= 6; ++bo)
      for (int ao = 0; ao <= 6; ++ao)
        for (int nei = 0; nei <= 6; ++nei) {
          const PairedComparison c = ComparePaired({both, bo, ao, nei});
          if (c.n == 0) continue;
          EXPECT_LE(c.ci95.lo, c.delta) << both << bo << ao << nei;
          EXPECT_GE(c.ci95.hi, c.delta) << both << bo << ao << nei;
          EXPECT_GE(c.ci95.lo, -1.0);
          EXPECT_LE(c.ci95.hi, 1.0);
          EXPECT_GE(c.mcnemar_p, 0.0);
          EXPECT_LE(c.mcnemar_p, 1.0);
        }
  // All wrong under B, all right under A: the loss is certain-ish but bounded by -1.
  const PairedComparison worst = ComparePaired({0, 0, 5, 0});
  EXPECT_EQ(worst.delta, -1.0);
  EXPECT_GE(worst.ci95.lo, -1.0);
  EXPECT_LT(worst.ci95.hi, 0.0);
}

TEST(HarnessPairedStats, EmptyTableIsHarmless) {
  const PairedComparison c = ComparePaired({});
  EXPECT_EQ(c.n, 0);
  EXPECT_EQ(c.delta, 0.0);
  EXPECT_EQ(c.ci95.lo, -1.0);
  EXPECT_EQ(c.ci95.hi, 1.0);
  EXPECT_EQ(c.mcnemar_p, 1.0);
  EXPECT_FALSE(c.WithinLoss(0.01, 0.02));  // nothing measured supports nothing
}

TEST(HarnessPairedStats, CountPairsOverAllOrASubset) {
  const std::vector<bool> a = {true, true, false, false, true};
  const std::vector<bool> b = {true, false, true, false, true};
  PairedCounts c = CountPairs(a, b);
  EXPECT_EQ(c.both, 2);
  EXPECT_EQ(c.a_only, 1);
  EXPECT_EQ(c.b_only, 1);
  EXPECT_EQ(c.neither, 1);
  c = CountPairs(a, b, {1, 3});
  EXPECT_EQ(c.n(), 2);
  EXPECT_EQ(c.a_only, 1);
  EXPECT_EQ(c.neither, 1);
}

TEST(HarnessPairedStats, WithinLossNeedsTheIntervalNotJustTheEstimate) {
  // 100 requests, 2 gained and 2 lost: Δ = 0 but the interval reaches below -2 points.
  const PairedComparison few = ComparePaired({60, 2, 2, 36});
  EXPECT_EQ(few.delta, 0.0);
  EXPECT_LT(few.ci95.lo, -0.02);
  EXPECT_FALSE(few.WithinLoss(0.01, 0.02));
  // 2,000 requests with the same 2-and-2 discordance: the interval supports "within 1 point".
  const PairedComparison many = ComparePaired({1200, 2, 2, 796});
  EXPECT_TRUE(many.WithinLoss(0.01, 0.02));
  // A point estimate beyond 1 point fails whatever the interval.
  const PairedComparison lossy = ComparePaired({1200, 0, 30, 770});
  EXPECT_FALSE(lossy.WithinLoss(0.01, 0.02));
}

}  // namespace
}  // namespace bicache::harness
