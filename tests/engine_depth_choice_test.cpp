// The depth choice without a model: layers held per mode and depth per (mode, ratio).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "engine/depth_table.h"
#include "test_util.h"

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

// Criterion "answers": agreement/accuracy per depth 0..4 of a 4-layer model.
CalibrationBin AnswerBin(int pct, int samples, std::vector<double> agree, std::vector<double> acc) {
  CalibrationBin b;
  b.ratio_pct = pct;
  b.samples = samples;
  b.agreement = std::move(agree);
  b.accuracy = std::move(acc);
  return b;
}

TEST(DepthChoice, AnswerBinDepthIsTheLeadingRunOfSafeDepths) {
  // Depth 1 and 2 agree enough; depth 3 does not; depth 4 agrees again (noise): 2, not 4.
  EXPECT_EQ(DepthTable::AnswerBinDepth(
                AnswerBin(50, 40, {1, 0.99, 0.98, 0.90, 0.99}, {0.5, 0.5, 0.5, 0.5, 0.5}), 0.98, 4),
            2);
  // Agreement fine but accuracy lower than none's at depth 2: 1.
  EXPECT_EQ(DepthTable::AnswerBinDepth(
                AnswerBin(50, 40, {1, 1, 0.99, 0.99, 0.99}, {0.5, 0.55, 0.475, 0.5, 0.5}), 0.98, 4),
            1);
  // Every depth safe: the whole model; none safe: 0.
  EXPECT_EQ(
      DepthTable::AnswerBinDepth(AnswerBin(50, 40, {1, 1, 1, 1, 1}, {.5, .5, .5, .5, .5}), 0.98, 4),
      4);
  EXPECT_EQ(DepthTable::AnswerBinDepth(AnswerBin(50, 40, {1, .5, 1, 1, 1}, {.5, .5, .5, .5, .5}),
                                       0.98, 4),
            0);
  EXPECT_EQ(DepthTable::AnswerBinDepth(AnswerBin(50, 40, {}, {}), 0.98, 4), 0);
}

TEST(DepthChoice, AnswerTableTakesTheEnvelopeAndDropsSmallBins) {
  const std::vector<double> acc(5, 0.5);
  const DepthTable t = DepthTable::FromAnswerBins(
      {AnswerBin(60, 30, {1, 1, 1, 1, 0.5}, acc),      // depth 3
       AnswerBin(20, 30, {1, 1, 0.5, 0.5, 0.5}, acc),  // depth 1
       AnswerBin(40, 30, {1, 1, 1, 1, 1}, acc),        // depth 4, capped by 60%'s 3
       AnswerBin(80, 5, {1, 0, 0, 0, 0}, acc)},        // 5 samples < 20: dropped
      0.98, 4, 20);
  EXPECT_EQ(t.criterion(), DepthCriterion::kAnswers);
  ASSERT_EQ(t.bins().size(), 3u);
  EXPECT_EQ(t.Lookup(0.1), 0);
  EXPECT_EQ(t.Lookup(0.25), 1);
  EXPECT_EQ(t.Lookup(0.45), 3);
  EXPECT_EQ(t.Lookup(0.9), 3);  // the dropped 80% bin does not pull the top down
  EXPECT_EQ(t.DepthOfBin(t.bins()[1]), 4);
}

TEST(DepthChoice, AnswerTableSurvivesSaveAndLoad) {
  const std::vector<double> acc{0.5, 0.5, 0.5, 0.25, 0.5};
  const DepthTable t =
      DepthTable::FromAnswerBins({AnswerBin(30, 25, {1, 1, 0.99, 0.9, 0.5}, acc)}, 0.98, 4, 20);
  const std::string path = ::testing::TempDir() + "/answers.depth.json";
  t.Save(path);
  const DepthTable back = DepthTable::Load(path);
  std::remove(path.c_str());
  EXPECT_EQ(back.criterion(), DepthCriterion::kAnswers);
  EXPECT_DOUBLE_EQ(back.threshold(), 0.98);
  ASSERT_EQ(back.bins().size(), 1u);
  EXPECT_EQ(back.bins()[0].agreement, t.bins()[0].agreement);
  EXPECT_EQ(back.bins()[0].accuracy, acc);
  EXPECT_TRUE(back.bins()[0].similarity.empty());
  EXPECT_EQ(back.Lookup(0.35), 2);
  // A similarity table written before criteria existed still loads as kv_similarity.
  EXPECT_EQ(Table().criterion(), DepthCriterion::kKvSimilarity);
}

TEST(DepthChoice, CalibrationSettingsAreSavedAndAMismatchIsNamed) {
  DepthTable t = DepthTable::FromAnswerBins(
      {AnswerBin(30, 25, {1, 1, 0.99, 0.9, 0.5}, {0.5, 0.5, 0.5, 0.25, 0.5})}, 0.98, 4, 20);
  diffusion::SamplerConfig s;                   // gen 32, steps 32, one block of 32
  EXPECT_EQ(CalibrationMismatch(t, s, 8), "");  // a table that does not say: nothing to compare
  t.set_calibrated_with({"tests/data/suite/calibration.jsonl", 240, 32, 32, 32, 8});
  const std::string path = ::testing::TempDir() + "/settings.depth.json";
  t.Save(path);
  const DepthTable back = DepthTable::Load(path);
  ASSERT_TRUE(back.calibrated_with().has_value());
  EXPECT_EQ(DescribeCalibration(*back.calibrated_with()),
            "240 samples of tests/data/suite/calibration.jsonl, gen 32, steps 32, block 32, "
            "refresh 8");
  EXPECT_EQ(CalibrationMismatch(back, s, 8), "");
  s.block_length = 8;
  const std::string m = CalibrationMismatch(back, s, 0);
  EXPECT_NE(m.find("measured with block 32, refresh 8 (here: block 8, refresh 0)"),
            std::string::npos)
      << m;
  // A K/V-similarity table records no generation: no mismatch to report.
  DepthTable kv = Table();
  kv.set_calibrated_with({"x.jsonl", 10, 32});
  EXPECT_EQ(DescribeCalibration(*kv.calibrated_with()), "10 samples of x.jsonl, gen 32");
  EXPECT_EQ(CalibrationMismatch(kv, s, 0), "");
  // A malformed record is refused by name.
  {
    std::ofstream f(path);
    f << R"({"format": "bicache-depth-table/1", "threshold": 0.98, "n_layer": 4, "points": [],
             "calibrated_with": {"suite": "x", "samples": -3, "gen_length": 32}})";
  }
  testing::ExpectError([&] { DepthTable::Load(path); }, ErrorKind::kFormat, "calibrated_with");
  std::remove(path.c_str());
}

// The fast profile's criterion: a depth holds while it loses at most max_drop points and its
// paired interval's lower end stays above -2 x max_drop; the leading run of such depths counts.
TEST(DepthChoice, AccuracyBinDepthBoundsTheLossAndItsInterval) {
  CalibrationBin b = AnswerBin(60, 200, {1, .9, .8, .7, .6}, {.50, .505, .495, .48, .50});
  b.accuracy_low = {0, -.01, -.015, -.03, -.01};
  EXPECT_EQ(DepthTable::AccuracyBinDepth(b, 1.0, 4), 2);  // d3 loses 2 points
  EXPECT_EQ(DepthTable::AccuracyBinDepth(b, 2.0, 4), 4);  // within 2, lower ends within 4
  b.accuracy_low[1] = -0.021;                             // d1's interval reaches past -2
  EXPECT_EQ(DepthTable::AccuracyBinDepth(b, 1.0, 4), 0);
  b.accuracy_low.clear();  // an answers bin: no interval, no depth by this criterion
  EXPECT_EQ(DepthTable::AccuracyBinDepth(b, 1.0, 4), 0);
}

TEST(DepthChoice, AccuracyTableSurvivesSaveAndLoad) {
  CalibrationBin b = AnswerBin(70, 100, {1, .9, .8}, {.5, .5, .49});
  b.accuracy_low = {0, -.012, -.019};
  DepthTable t = DepthTable::FromAnswerBins({b}, 1.0, 2, 20, DepthCriterion::kAccuracy);
  t.set_model_shape(64, 300);
  EXPECT_EQ(t.Lookup(0.75), 2);
  const std::string path = ::testing::TempDir() + "/accuracy.depth.json";
  t.Save(path);
  const DepthTable back = DepthTable::Load(path);
  std::remove(path.c_str());
  EXPECT_EQ(back.criterion(), DepthCriterion::kAccuracy);
  EXPECT_EQ(back.bins()[0].accuracy_low, b.accuracy_low);
  EXPECT_EQ(back.d_model(), 64);
  EXPECT_EQ(back.n_vocab(), 300);
  EXPECT_EQ(back.DepthOfBin(back.bins()[0]), 2);
}

// --depth-profile: safe is always there (a missing file serves depth 0 with a warning), fast needs
// its file, anything else must be a table file.
TEST(DepthChoice, DepthProfilesResolveOrAreRefusedByName) {
  const std::string dir = ::testing::TempDir() + "/profiles";
  std::filesystem::create_directories(dir);
  const std::string model = dir + "/m.gguf";
  EXPECT_EQ(DepthTable::PathForModel(model, "safe"), model + ".depth.json");
  EXPECT_EQ(DepthTable::PathForModel(model, ""), model + ".depth.json");
  EXPECT_EQ(DepthTable::PathForModel(model, "fast"), model + ".depth.fast.json");
  EXPECT_EQ(DepthTable::PathForModel(model, "/x/t.json"), "/x/t.json");
  EXPECT_NO_THROW(CheckDepthProfile(model, "safe"));
  testing::ExpectError([&] { CheckDepthProfile(model, "fast"); }, ErrorKind::kInvalidArgument,
                       "--depth-profile fast: this model has no fast table");
  testing::ExpectError([&] { CheckDepthProfile(model, "fastest"); }, ErrorKind::kInvalidArgument,
                       "--depth-profile 'fastest': neither a profile (safe, fast) nor a depth "
                       "table file");
  { std::ofstream(model + ".depth.fast.json") << "{}"; }
  EXPECT_NO_THROW(CheckDepthProfile(model, "fast"));
  std::filesystem::remove_all(dir);
}

TEST(DepthChoice, UnknownCriterionIsNamed) {
  testing::ExpectError([] { ParseDepthCriterion("cosine"); }, ErrorKind::kInvalidArgument,
                       "unknown depth criterion 'cosine'");
}

}  // namespace
}  // namespace bicache::engine
