// harness/bench.h: the names `bench --depth-tables` gives its extra modes, which label the rows of
// the table, the JSON keys and the trade-off plot.
#include <gtest/gtest.h>

#include "harness/bench.h"

namespace bicache::harness {
namespace {

engine::CalibrationBin Bin(int ratio_pct) {
  engine::CalibrationBin b;
  b.ratio_pct = ratio_pct;
  b.samples = 8;
  b.similarity = {0.9999, 0.999};
  b.agreement = {1.0, 1.0, 0.99};
  b.accuracy = {0.5, 0.5, 0.5};
  return b;
}

TEST(HarnessBenchNames, DepthTableModeNameSaysCriterionAndThreshold) {
  EXPECT_EQ(DepthTableModeName(engine::DepthTable::FromBins({Bin(10)}, 0.998, 2)),
            "bicache[kv 0.998]");
  EXPECT_EQ(DepthTableModeName(engine::DepthTable::FromAnswerBins({Bin(10)}, 0.98, 2, 1)),
            "bicache[answers 0.98]");
  // Up to 6 significant digits, no trailing zeros: close thresholds stay apart.
  EXPECT_EQ(DepthTableModeName(engine::DepthTable::FromBins({Bin(10)}, 0.99875, 2)),
            "bicache[kv 0.99875]");
  EXPECT_EQ(DepthTableModeName(engine::DepthTable::FromBins({Bin(10)}, 0.9, 2)), "bicache[kv 0.9]");
}

}  // namespace
}  // namespace bicache::harness
