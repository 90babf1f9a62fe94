// Denoiser behaviour on synthetic logits: exact reproduction at temperature 0, seeding, stops,
// guidance, streaming prefix, per-row scoring, and config validation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "diffusion/denoiser.h"
#include "diffusion/row_scorer.h"
#include "test_util.h"
#include "util/error.h"
#include "util/field_error.h"

namespace bicache::diffusion {
namespace {

constexpr int kVocab = 32;
constexpr int32_t kMask = 31;
constexpr int32_t kEos = 30;
constexpr int32_t kEot = 29;

constexpr Algorithm kAll[] = {Algorithm::kLowConfidence, Algorithm::kRandom,
                              Algorithm::kOrigin,        Algorithm::kMaskgitPlus,
                              Algorithm::kTopkMargin,    Algorithm::kEntropy};

SamplerConfig Config(int gen_length, int steps, int block_length, Algorithm alg) {
  SamplerConfig c;
  c.gen_length = gen_length;
  c.steps = steps;
  c.block_length = block_length;
  c.algorithm = alg;
  c.mask_id = kMask;
  return c;
}

// Row p peaks at target[p]; peaks[p] (default 6 + p % 5) sets how confident that row is.
std::vector<float> TargetLogits(const std::vector<int32_t>& target, std::vector<float> peaks = {}) {
  std::vector<float> logits(target.size() * kVocab, 0.0f);
  for (size_t p = 0; p < target.size(); ++p) {
    const float peak = peaks.empty() ? 6.0f + static_cast<float>(p % 5) : peaks[p];
    logits[p * kVocab + target[p]] = peak;
  }
  return logits;
}

std::vector<int32_t> Sequence(int n) {
  std::vector<int32_t> t(n);
  for (int p = 0; p < n; ++p) t[p] = (p * 7 + 3) % 25;  // never a stop or the mask token
  return t;
}

// Pseudo-random, fairly flat logits, so sampled outputs depend on the seed.
std::vector<float> NoisyLogits(int gen_length) {
  std::vector<float> logits(static_cast<size_t>(gen_length) * kVocab);
  uint32_t x = 12345;
  for (float& v : logits) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<float>(x >> 8) / static_cast<float>(1u << 24) * 2.0f;
  }
  return logits;
}

std::vector<int32_t> RunToEnd(const SamplerConfig& c, const std::vector<float>& logits,
                              const std::vector<float>* uncond = nullptr) {
  Denoiser d(c, kVocab);
  while (!d.done()) d.Step(logits.data(), uncond ? uncond->data() : nullptr);
  return d.canvas();
}

// Expects Error(kInvalidArgument) whose message mentions `needle`.
template <typename F>
void ExpectInvalid(F&& f, const std::string& needle) {
  bicache::testing::ExpectError(std::forward<F>(f), ErrorKind::kInvalidArgument, needle);
}

TEST(DiffusionSampler, ParseAlgorithmNamesAndErrors) {
  for (Algorithm a : kAll) EXPECT_EQ(ParseAlgorithm(AlgorithmName(a)), a);
  try {
    ParseAlgorithm("greedy");
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(m.find("greedy"), std::string::npos) << m;
    EXPECT_NE(m.find("low_confidence"), std::string::npos) << m;
    EXPECT_NE(m.find("maskgit_plus"), std::string::npos) << m;
  }
}

TEST(DiffusionSampler, EveryInvalidConfigNamesItsField) {
  struct Case {
    std::string needle;
    void (*edit)(SamplerConfig&);
  };
  const Case cases[] = {
      {"gen_length", [](SamplerConfig& c) { c.gen_length = 0; }},
      {"block_length", [](SamplerConfig& c) { c.block_length = 0; }},
      {"block_length", [](SamplerConfig& c) { c.block_length = 5; }},  // 32 % 5 != 0
      {"steps", [](SamplerConfig& c) { c.steps = 0; }},
      {"steps", [](SamplerConfig& c) { c.block_length = 8, c.steps = 6; }},  // 4 blocks
      {"temperature", [](SamplerConfig& c) { c.temperature = -0.1f; }},
      {"temperature", [](SamplerConfig& c) { c.temperature = std::nanf(""); }},
      {"top_p", [](SamplerConfig& c) { c.top_p = 0; }},
      {"top_p", [](SamplerConfig& c) { c.top_p = 1.5f; }},
      {"top_k", [](SamplerConfig& c) { c.top_k = -1; }},
      {"eps", [](SamplerConfig& c) { c.eps = 0; }},
      {"eps", [](SamplerConfig& c) { c.eps = 1; }},
      {"cfg", [](SamplerConfig& c) { c.cfg_scale = -1; }},
      {"threshold", [](SamplerConfig& c) { c.threshold = 1; }},
      {"threshold", [](SamplerConfig& c) { c.threshold = -0.5f; }},
      {"threshold", [](SamplerConfig& c) { c.threshold = 0.9f, c.algorithm = Algorithm::kRandom; }},
      {"threshold", [](SamplerConfig& c) { c.threshold = 0.9f, c.algorithm = Algorithm::kOrigin; }},
      {"threshold",
       [](SamplerConfig& c) { c.threshold = 0.9f, c.algorithm = Algorithm::kEntropy; }},
      {"alg_temp", [](SamplerConfig& c) { c.alg_temp = -1; }},
      {"alg_temp", [](SamplerConfig& c) { c.alg_temp = 0.5f; }},  // low_confidence
      {"alg_temp", [](SamplerConfig& c) { c.alg_temp = 0.5f, c.algorithm = Algorithm::kOrigin; }},
      {"alg_temp",
       [](SamplerConfig& c) {
         c.alg_temp = 0.5f, c.algorithm = Algorithm::kMaskgitPlus, c.threshold = 0.9f;
       }},
      {"mask_id", [](SamplerConfig& c) { c.mask_id = -1; }},
      {"stop_ids", [](SamplerConfig& c) { c.stop_ids = {-3}; }},
      {"stop_ids", [](SamplerConfig& c) { c.stop_ids = {kMask}; }},
  };
  for (const Case& k : cases) {
    SamplerConfig c = Config(32, 32, 32, Algorithm::kLowConfidence);
    k.edit(c);
    ExpectInvalid([&] { Validate(c); }, k.needle);
    // The field the error is about is the first one its message names (the API's "param").
    try {
      Validate(c);
    } catch (const FieldError& e) {
      const bool named = k.needle != "mask_id" && k.needle != "stop_ids";
      EXPECT_EQ(e.field(), named ? k.needle : "") << e.what();
    }
    ExpectInvalid([&] { Denoiser d(c, kVocab); }, k.needle);
  }
  // Vocabulary-dependent checks happen in the constructor.
  SamplerConfig c = Config(32, 32, 32, Algorithm::kLowConfidence);
  c.mask_id = kVocab;
  ExpectInvalid([&] { Denoiser d(c, kVocab); }, "mask_id");
  c.mask_id = kMask;
  c.stop_ids = {kVocab + 4};
  ExpectInvalid([&] { Denoiser d(c, kVocab); }, "stop_ids");
  c.stop_ids = {};
  ExpectInvalid([&] { Denoiser d(c, 0); }, "vocab_size");
  // Valid corner cases pass.
  SamplerConfig ok = Config(32, 64, 8, Algorithm::kMaskgitPlus);
  ok.alg_temp = 0.5f;
  ok.top_p = 1;
  ok.top_k = 3;
  EXPECT_NO_THROW(Validate(ok));
}

TEST(DiffusionSampler, TemperatureZeroReproducesTargetForEveryAlgorithm) {
  const std::vector<int32_t> target = Sequence(32);
  const std::vector<float> logits = TargetLogits(target);
  for (Algorithm alg : kAll) {
    for (int block : {8, 32}) {
      SCOPED_TRACE(::testing::Message() << AlgorithmName(alg) << " block=" << block);
      SamplerConfig c = Config(32, 16, block, alg);
      EXPECT_EQ(RunToEnd(c, logits), target);
      c.top_k = 3;
      c.top_p = 0.9f;
      EXPECT_EQ(RunToEnd(c, logits), target);
    }
  }
}

TEST(DiffusionSampler, LowConfidenceCommitsMostConfidentFirst) {
  const std::vector<int32_t> target = Sequence(8);
  std::vector<float> peaks = {3, 9, 4, 8, 5, 7, 6, 2};  // rank: 1,3,5,6,4,2,0,7
  const std::vector<float> logits = TargetLogits(target, peaks);
  for (Algorithm alg : {Algorithm::kLowConfidence, Algorithm::kMaskgitPlus, Algorithm::kTopkMargin,
                        Algorithm::kEntropy}) {
    Denoiser d(Config(8, 4, 8, alg), kVocab);  // LLaDA: 2 per step
    std::vector<int> first = d.Step(logits.data());
    if (alg == Algorithm::kLowConfidence) {
      EXPECT_EQ(first, (std::vector<int>{1, 3}));
      EXPECT_EQ(d.Step(logits.data()), (std::vector<int>{5, 6}));
    } else {
      // Dream's first step commits int(8 * (1 - s/t)) of the most confident.
      ASSERT_FALSE(first.empty());
      EXPECT_EQ(first[0], 1) << AlgorithmName(alg);
    }
  }
}

TEST(DiffusionSampler, SameSeedSameCanvasDifferentSeedDifferent) {
  const std::vector<float> logits = NoisyLogits(32);
  for (Algorithm alg : kAll) {
    SCOPED_TRACE(AlgorithmName(alg));
    SamplerConfig c = Config(32, 16, 16, alg);
    c.temperature = 1.0f;
    c.seed = 42;
    const std::vector<int32_t> a = RunToEnd(c, logits), b = RunToEnd(c, logits);
    EXPECT_EQ(a, b);
    c.seed = 43;
    EXPECT_NE(RunToEnd(c, logits), a);
  }
  // alg_temp position sampling is seeded too.
  SamplerConfig c = Config(32, 8, 32, Algorithm::kEntropy);
  c.alg_temp = 0.5f;
  c.temperature = 0.7f;
  c.top_p = 0.95f;
  c.seed = 1;
  EXPECT_EQ(RunToEnd(c, logits), RunToEnd(c, logits));
}

TEST(DiffusionSampler, OutputDoesNotDependOnThreadCount) {
#ifdef _OPENMP
  // A realistic vocabulary, so rows are actually scored in parallel.
  const int vocab = 40000, gen = 8;
  std::vector<float> logits(static_cast<size_t>(gen) * vocab);
  uint32_t x = 777;
  for (float& v : logits) {
    x = x * 1664525u + 1013904223u;
    v = static_cast<float>(x >> 8) / static_cast<float>(1u << 24) * 4.0f;
  }
  for (Algorithm alg : kAll) {
    SamplerConfig c = Config(gen, 4, gen, alg);
    c.mask_id = vocab - 1;
    c.temperature = 0.8f;
    c.seed = 9;
    const int saved = omp_get_max_threads();
    std::vector<int32_t> out[2];
    for (int i = 0; i < 2; ++i) {
      omp_set_num_threads(i == 0 ? 1 : 3);
      Denoiser d(c, vocab);
      while (!d.done()) d.Step(logits.data());
      out[i] = d.canvas();
    }
    omp_set_num_threads(saved);
    EXPECT_EQ(out[0], out[1]) << AlgorithmName(alg);
  }
#else
  GTEST_SKIP() << "built without OpenMP";
#endif
}

TEST(DiffusionSampler, StopTokenEndsTheAnswerAndPadsWithEos) {
  std::vector<int32_t> target = Sequence(16);
  target[5] = kEos;
  const std::vector<float> logits = TargetLogits(target);
  for (Algorithm alg : kAll) {
    SCOPED_TRACE(AlgorithmName(alg));
    SamplerConfig c = Config(16, 16, 16, alg);
    c.stop_ids = {kEos, kEot};
    Denoiser d(c, kVocab);
    while (!d.done()) d.Step(logits.data());
    EXPECT_EQ(d.finish_reason(), "stop");
    EXPECT_EQ(d.answer_length(), 5);
    EXPECT_EQ(d.committed_prefix(), 16);
    for (int p = 0; p < 5; ++p) EXPECT_EQ(d.canvas()[p], target[p]);
    for (int p = 5; p < 16; ++p) EXPECT_EQ(d.canvas()[p], kEos);
  }
}

TEST(DiffusionSampler, EndOfTurnStopsAndPadsWithFirstStopId) {
  std::vector<int32_t> target = Sequence(8);
  target[3] = kEot;
  const std::vector<float> logits = TargetLogits(target);
  SamplerConfig c = Config(8, 8, 8, Algorithm::kLowConfidence);
  c.stop_ids = {kEos, kEot};
  const std::vector<int32_t> out = RunToEnd(c, logits);
  EXPECT_EQ(out[3], kEot);
  for (int p = 4; p < 8; ++p) EXPECT_EQ(out[p], kEos);
}

TEST(DiffusionSampler, StopIsFinalOnlyOnceEverythingBeforeItIsCommitted) {
  std::vector<int32_t> target = Sequence(8);
  target[6] = kEos;
  std::vector<float> peaks(8, 5.0f);
  peaks[6] = 12.0f;  // the EOS is the most confident position: committed first
  const std::vector<float> logits = TargetLogits(target, peaks);
  SamplerConfig c = Config(8, 8, 8, Algorithm::kLowConfidence);
  c.stop_ids = {kEos};
  Denoiser d(c, kVocab);
  EXPECT_EQ(d.Step(logits.data()), (std::vector<int>{6}));
  EXPECT_FALSE(d.done());
  EXPECT_EQ(d.finish_reason(), "");
  while (!d.done()) d.Step(logits.data());
  EXPECT_EQ(d.finish_reason(), "stop");
  EXPECT_EQ(d.answer_length(), 6);
  EXPECT_EQ(d.step(), 7);  // position 7 never needed a step of its own
  EXPECT_EQ(d.canvas()[7], kEos);
}

TEST(DiffusionSampler, NoStopFinishesWithLength) {
  const std::vector<int32_t> target = Sequence(16);
  SamplerConfig c = Config(16, 8, 8, Algorithm::kMaskgitPlus);
  c.stop_ids = {kEos};
  Denoiser d(c, kVocab);
  const std::vector<float> logits = TargetLogits(target);
  while (!d.done()) d.Step(logits.data());
  EXPECT_EQ(d.finish_reason(), "length");
  EXPECT_EQ(d.answer_length(), 16);
  EXPECT_EQ(d.canvas(), target);
  ExpectInvalid([&] { d.Step(logits.data()); }, "finished");
}

TEST(DiffusionSampler, ClassifierFreeGuidanceCombinesBothPasses) {
  // Conditional alone prefers token 2 (2.1 vs 2.0); the unconditional pass likes token 2 just as
  // much and token 1 not at all, so guidance u + 2 (c - u) picks token 1.
  const int gen = 4;
  std::vector<float> cond(gen * kVocab, 0.0f), uncond(gen * kVocab, 0.0f);
  for (int p = 0; p < gen; ++p) {
    cond[p * kVocab + 1] = 2.0f;
    cond[p * kVocab + 2] = 2.1f;
    uncond[p * kVocab + 1] = 0.0f;
    uncond[p * kVocab + 2] = 2.1f;
  }
  SamplerConfig c = Config(gen, gen, gen, Algorithm::kLowConfidence);
  EXPECT_EQ(RunToEnd(c, cond), (std::vector<int32_t>(gen, 2)));
  c.cfg_scale = 1.0f;
  EXPECT_EQ(RunToEnd(c, cond, &uncond), (std::vector<int32_t>(gen, 1)));
  Denoiser d(c, kVocab);
  ExpectInvalid([&] { d.Step(cond.data()); }, "uncond_logits");
}

TEST(DiffusionSampler, CommittedPrefixGrowsMonotonically) {
  const int gen = 16;
  const std::vector<int32_t> target = Sequence(gen);
  std::vector<float> peaks(gen);
  for (int p = 0; p < gen; ++p) peaks[p] = 20.0f - p;  // left-to-right confidence
  const std::vector<float> logits = TargetLogits(target, peaks);
  Denoiser d(Config(gen, 8, gen, Algorithm::kLowConfidence), kVocab);  // 2 per step
  int last = 0;
  EXPECT_EQ(d.committed_prefix(), 0);
  while (!d.done()) {
    d.Step(logits.data());
    EXPECT_EQ(d.committed_prefix(), last + 2);
    for (int p = 0; p < d.committed_prefix(); ++p) EXPECT_EQ(d.canvas()[p], target[p]);
    last = d.committed_prefix();
  }
  EXPECT_EQ(last, gen);
  // Right-to-left confidence: nothing is streamable until the very last step.
  for (int p = 0; p < gen; ++p) peaks[p] = 5.0f + p;
  const std::vector<float> rtl = TargetLogits(target, peaks);
  Denoiser r(Config(gen, 8, gen, Algorithm::kLowConfidence), kVocab);
  while (!r.done()) {
    r.Step(rtl.data());
    EXPECT_EQ(r.committed_prefix(), r.done() ? gen : 0);
  }
}

TEST(DiffusionSampler, RejectsBadRowsAndNullLogits) {
  std::vector<float> logits = TargetLogits(Sequence(4));
  logits[2 * kVocab + 5] = std::numeric_limits<float>::quiet_NaN();
  Denoiser d(Config(4, 4, 4, Algorithm::kLowConfidence), kVocab);
  ExpectInvalid([&] { d.Step(logits.data()); }, "position 2");
  ExpectInvalid([&] { d.Step(nullptr); }, "logits");
}

// ---- RowScorer: one row's x0 and confidence --------------------------------------------------

// Row whose softmax over the non-mask tokens is exactly `probs` (the rest ~0).
std::vector<float> RowFromProbs(const std::vector<double>& probs) {
  std::vector<float> row(kVocab, -1000.0f);
  for (size_t v = 0; v < probs.size(); ++v) row[v] = static_cast<float>(std::log(probs[v]));
  return row;
}

double Confidence(Algorithm alg, const std::vector<float>& row, float top_p = 1, int top_k = 0) {
  SamplerConfig c = Config(8, 8, 8, alg);
  c.top_p = top_p;
  c.top_k = top_k;
  RowScorer s(c, kVocab);
  return s.Score(row.data(), nullptr, 0.5, 0).confidence;
}

TEST(DiffusionSampler, RowScorerConfidences) {
  const std::vector<float> row = RowFromProbs({0.5, 0.3, 0.2});
  EXPECT_NEAR(Confidence(Algorithm::kLowConfidence, row), 0.5, 1e-6);
  EXPECT_NEAR(Confidence(Algorithm::kMaskgitPlus, row), 0.5, 1e-6);
  EXPECT_NEAR(Confidence(Algorithm::kTopkMargin, row), 0.2, 1e-6);
  const double neg_entropy = 0.5 * std::log(0.5) + 0.3 * std::log(0.3) + 0.2 * std::log(0.2);
  EXPECT_NEAR(Confidence(Algorithm::kEntropy, row), neg_entropy, 1e-6);
  // Dream filters renormalise the distribution even at temperature 0.
  EXPECT_NEAR(Confidence(Algorithm::kMaskgitPlus, row, 1, 2), 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(Confidence(Algorithm::kMaskgitPlus, row, 0.6f), 0.5 / 0.8, 1e-6);  // keeps crosser
  EXPECT_NEAR(Confidence(Algorithm::kMaskgitPlus, row, 0.4f), 1.0, 1e-6);
  EXPECT_NEAR(Confidence(Algorithm::kTopkMargin, row, 1, 2), 0.2 / 0.8, 1e-6);
  // LLaDA's confidence is always the unfiltered softmax.
  EXPECT_NEAR(Confidence(Algorithm::kLowConfidence, row, 1, 2), 0.5, 1e-6);
}

TEST(DiffusionSampler, RowScorerSamplesTheTemperedDistribution) {
  // With a grid of uniforms, inverse-CDF sampling hits each token in proportion to softmax(l/T).
  const std::vector<float> row = RowFromProbs({0.5, 0.3, 0.2});
  for (float temperature : {1.0f, 0.5f}) {
    SamplerConfig c = Config(8, 8, 8, Algorithm::kLowConfidence);
    c.temperature = temperature;
    RowScorer s(c, kVocab);
    const int n = 10000;
    std::vector<int> hits(kVocab, 0);
    for (int i = 0; i < n; ++i) ++hits[s.Score(row.data(), nullptr, (i + 0.5) / n, 0).token];
    double z = 0;
    for (double p : {0.5, 0.3, 0.2}) z += std::pow(p, 1.0 / temperature);
    const double expect[] = {std::pow(0.5, 1 / temperature) / z, std::pow(0.3, 1 / temperature) / z,
                             std::pow(0.2, 1 / temperature) / z};
    for (int v = 0; v < 3; ++v)
      EXPECT_NEAR(hits[v] / double(n), expect[v], 2e-3) << "T=" << temperature;
    // The confidence stays softmax(l)[x0] of the untempered logits.
    EXPECT_NEAR(s.Score(row.data(), nullptr, 0.99, 0).confidence, 0.2, 1e-6);
  }
}

TEST(DiffusionSampler, MaskTokenIsNeverProposed) {
  std::vector<float> row(kVocab, 0.0f);
  row[kMask] = 50.0f;
  row[4] = 1.0f;
  RowScorer s(Config(8, 8, 8, Algorithm::kMaskgitPlus), kVocab);
  EXPECT_EQ(s.Score(row.data(), nullptr, 0.5, 0).token, 4);
}

}  // namespace
}  // namespace bicache::diffusion
