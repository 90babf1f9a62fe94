// The depth choice without a model: layers held per mode and depth per (mode, ratio).
#include <gtest/gtest.h>

#include "engine/depth_table.h"

namespace bicache::engine {
namespace {

// A table that serves depth 1 from ratio 20%, 3 from 50% (of a 4-layer model).
DepthTable Table() {
  auto bin = [](int pct, std::vector<double> sim) {
    CalibrationBin b;
    b.ratio_pct = pct;
    b.samples = 1;
    b.similarity = std::move(sim);
    return b;
  };
  return DepthTable::FromBins({bin(10, {0.5, 0.5, 0.5, 0.5}), bin(20, {0.99, 0.99, 0.5, 0.5}),
                               bin(50, {0.99, 0.99, 0.99, 0.99})},
                              0.97, 4);
}

TEST(DepthChoice, LayersHeldPerMode) {
  const DepthTable t = Table();
  ASSERT_EQ(t.max_depth(), 4);
  EXPECT_EQ(LayersHeldFor(ParseCacheMode("none"), t, 4), 0);
  EXPECT_EQ(LayersHeldFor(ParseCacheMode("dual"), t, 4), 0);
  EXPECT_EQ(LayersHeldFor(ParseCacheMode("llm"), t, 4), 4);
  EXPECT_EQ(LayersHeldFor(ParseCacheMode("fixed:2"), t, 4), 2);
  EXPECT_EQ(LayersHeldFor(ParseCacheMode("fixed:2+dual"), t, 4), 2);
  EXPECT_EQ(LayersHeldFor(ParseCacheMode("bicache"), t, 4), 4);
  EXPECT_EQ(LayersHeldFor(ParseCacheMode("bicache"), t, 3), 3);  // capped at the model's depth
  EXPECT_EQ(LayersHeldFor(ParseCacheMode("bicache"), DepthTable(), 4), 0);
}

TEST(DepthChoice, BicacheFollowsTheTableOtherModesHoldAll) {
  const DepthTable t = Table();
  const CacheMode bicache = ParseCacheMode("bicache");
  EXPECT_EQ(DepthFor(bicache, t, 4, 0.05), 0);  // below the first point: no reuse
  EXPECT_EQ(DepthFor(bicache, t, 4, 0.25), 1);
  EXPECT_EQ(DepthFor(bicache, t, 4, 0.75), 4);
  EXPECT_EQ(DepthFor(bicache, t, 2, 0.75), 2);  // capped at the model's depth
  EXPECT_EQ(DepthFor(bicache, DepthTable(), 4, 0.9), 0);
  EXPECT_EQ(DepthFor(ParseCacheMode("fixed:3"), t, 4, 0.01), 3);
  EXPECT_EQ(DepthFor(ParseCacheMode("llm"), t, 4, 0.01), 4);
  EXPECT_EQ(DepthFor(ParseCacheMode("none"), t, 4, 0.9), 0);
}

}  // namespace
}  // namespace bicache::engine
