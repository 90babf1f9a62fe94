// Denoising schedules: how many positions each step commits, and where.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "diffusion/denoiser.h"
#include "diffusion/schedule.h"
#include "util/error.h"

namespace bicache::diffusion {
namespace {

constexpr int kVocab = 32;
constexpr int32_t kMask = 31;

// Peaked logits: canvas position p predicts token (p % 20) with a peak that is the same for
// every position, so the confidences tie and only the schedule decides the counts.
std::vector<float> FlatPeakLogits(int gen_length, float peak = 8.0f) {
  std::vector<float> logits(static_cast<size_t>(gen_length) * kVocab, 0.0f);
  for (int p = 0; p < gen_length; ++p) logits[static_cast<size_t>(p) * kVocab + p % 20] = peak;
  return logits;
}

SamplerConfig Config(int gen_length, int steps, int block_length, Algorithm alg) {
  SamplerConfig c;
  c.gen_length = gen_length;
  c.steps = steps;
  c.block_length = block_length;
  c.algorithm = alg;
  c.mask_id = kMask;
  return c;
}

// Runs to completion; returns per-step commit counts and checks every commit lies in the block
// that was current when the step started.
std::vector<int> RunCounts(const SamplerConfig& c) {
  Denoiser d(c, kVocab);
  const std::vector<float> logits = FlatPeakLogits(c.gen_length);
  std::vector<int> counts;
  while (!d.done()) {
    const auto [begin, end] = d.current_block();
    const std::vector<int> got = d.Step(logits.data());
    EXPECT_FALSE(got.empty());
    for (int p : got) {
      EXPECT_GE(p, begin);
      EXPECT_LT(p, end);
    }
    counts.push_back(static_cast<int>(got.size()));
    if (counts.size() > 10000) break;
  }
  return counts;
}

// LLaDA reference, written out independently: within each block n masked tokens over s steps,
// step i gets floor(n / s) plus one if i < n mod s. Zero-count steps are skipped by the
// Denoiser (they would not change the canvas), so they are dropped here.
std::vector<int> LladaReference(int gen_length, int steps, int block_length) {
  const int blocks = gen_length / block_length;
  const int s = steps / blocks;
  std::vector<int> out;
  for (int b = 0; b < blocks; ++b) {
    for (int i = 0; i < s; ++i) {
      const int k = block_length / s + (i < block_length % s ? 1 : 0);
      if (k > 0) out.push_back(k);
    }
  }
  return out;
}

// Dream reference, written out independently: float32 torch.linspace(1, eps, s + 1) (first half
// from the start, second half from the end), then int(masked * (1 - t[i+1] / t[i])) in float32.
std::vector<int> DreamReference(int gen_length, int steps, int block_length, float eps) {
  const int blocks = gen_length / block_length;
  const int s = steps / blocks;
  const int n = s + 1;
  const float delta = (eps - 1.0f) / static_cast<float>(s);
  std::vector<float> t(n);
  for (int i = 0; i < n; ++i) {
    t[i] = i < n / 2 ? 1.0f + delta * static_cast<float>(i)
                     : eps - delta * static_cast<float>(n - 1 - i);
  }
  std::vector<int> out;
  for (int b = 0; b < blocks; ++b) {
    int masked = block_length;
    for (int i = 0; i < s; ++i) {
      const float ratio = 1.0f - t[i + 1] / t[i];
      const int k = i == s - 1 ? masked : static_cast<int>(static_cast<float>(masked) * ratio);
      masked -= k;
      if (k > 0) out.push_back(k);
    }
  }
  return out;
}

TEST(DiffusionSchedule, LladaTransferCountsSplitEvenlyRemainderFirst) {
  for (int n : {0, 1, 7, 32, 33, 100}) {
    for (int s : {1, 3, 8, 32, 64}) {
      const std::vector<int> counts = LladaTransferCounts(n, s);
      ASSERT_EQ(static_cast<int>(counts.size()), s);
      int sum = 0;
      for (int i = 0; i < s; ++i) {
        EXPECT_EQ(counts[i], n / s + (i < n % s ? 1 : 0)) << "n=" << n << " s=" << s << " i=" << i;
        sum += counts[i];
      }
      EXPECT_EQ(sum, n);
      EXPECT_TRUE(std::is_sorted(counts.rbegin(), counts.rend()));  // non-increasing
    }
  }
}

TEST(DiffusionSchedule, LladaPerStepCountsMatchReference) {
  struct Case {
    int gen, steps, block;
  };
  for (const Case& k : {Case{32, 32, 32}, Case{32, 8, 32}, Case{64, 16, 16}, Case{40, 12, 10},
                        Case{24, 6, 8}, Case{16, 32, 8}, Case{128, 64, 32}, Case{12, 4, 3}}) {
    for (Algorithm alg : {Algorithm::kLowConfidence, Algorithm::kRandom}) {
      SCOPED_TRACE(::testing::Message() << "gen=" << k.gen << " steps=" << k.steps
                                        << " block=" << k.block << " alg=" << AlgorithmName(alg));
      EXPECT_EQ(RunCounts(Config(k.gen, k.steps, k.block, alg)),
                LladaReference(k.gen, k.steps, k.block));
    }
  }
}

TEST(DiffusionSchedule, DreamTimestepsAreFloat32Linspace) {
  const std::vector<float> ts = DreamTimesteps(32, 1e-3f);
  ASSERT_EQ(ts.size(), 33u);
  EXPECT_EQ(ts.front(), 1.0f);
  EXPECT_EQ(ts.back(), 1e-3f);
  for (size_t i = 1; i < ts.size(); ++i) {
    EXPECT_LT(ts[i], ts[i - 1]);
    EXPECT_NEAR(ts[i], 1.0 - (1.0 - 1e-3) * static_cast<double>(i) / 32.0, 1e-6);
  }
  const std::vector<float> one = DreamTimesteps(1, 0.5f);
  EXPECT_EQ(one, (std::vector<float>{1.0f, 0.5f}));
}

TEST(DiffusionSchedule, DreamTransferCountTruncatesLikeTheReference) {
  // 32 masked, 32 steps: the first step's share is 32 * 0.03121875 = 0.999 -> int() gives 0.
  const std::vector<float> ts = DreamTimesteps(32, 1e-3f);
  EXPECT_EQ(DreamTransferCount(32, ts[0], ts[1], false), 0);
  EXPECT_EQ(DreamTransferCount(5, ts[30], ts[31], true), 5);
  EXPECT_FLOAT_EQ(DreamTransferProbability(ts[0], ts[1], false), 1.0f - ts[1] / ts[0]);
  EXPECT_EQ(DreamTransferProbability(ts[5], ts[6], true), 1.0f);
}

TEST(DiffusionSchedule, DreamPerStepCountsMatchReference) {
  struct Case {
    int gen, steps, block;
    float eps;
  };
  for (const Case& k : {Case{32, 32, 32, 1e-3f}, Case{32, 8, 32, 1e-3f}, Case{64, 64, 64, 1e-3f},
                        Case{64, 16, 16, 1e-3f}, Case{48, 12, 16, 0.1f}, Case{20, 40, 20, 1e-3f},
                        Case{256, 128, 256, 1e-3f}}) {
    for (Algorithm alg : {Algorithm::kMaskgitPlus, Algorithm::kTopkMargin, Algorithm::kEntropy}) {
      SCOPED_TRACE(::testing::Message() << "gen=" << k.gen << " steps=" << k.steps
                                        << " block=" << k.block << " alg=" << AlgorithmName(alg));
      SamplerConfig c = Config(k.gen, k.steps, k.block, alg);
      c.eps = k.eps;
      EXPECT_EQ(RunCounts(c), DreamReference(k.gen, k.steps, k.block, k.eps));
      // Sampling positions (alg_temp) changes which positions, never how many.
      c.alg_temp = 0.5f;
      c.seed = 3;
      EXPECT_EQ(RunCounts(c), DreamReference(k.gen, k.steps, k.block, k.eps));
    }
  }
}

TEST(DiffusionSchedule, DreamSkipsStepsThatCommitNothing) {
  // With steps == gen_length the reference commits 0 tokens on its first step; the Denoiser
  // must not spend a forward on it.
  Denoiser d(Config(32, 32, 32, Algorithm::kMaskgitPlus), kVocab);
  const std::vector<float> logits = FlatPeakLogits(32);
  EXPECT_EQ(d.Step(logits.data()).size(), 1u);
  while (!d.done()) d.Step(logits.data());
  EXPECT_LT(d.step(), 32);
  EXPECT_EQ(d.masked_count(), 0);
}

TEST(DiffusionSchedule, OriginCommitsInsideBlocksAndFinishesOnSchedule) {
  for (int block : {8, 32}) {
    SamplerConfig c = Config(32, 16, block, Algorithm::kOrigin);
    c.seed = 7;
    const std::vector<int> counts = RunCounts(c);
    int total = 0;
    for (int k : counts) total += k;
    EXPECT_EQ(total, 32);
    EXPECT_LE(static_cast<int>(counts.size()), 16);  // never more forwards than steps
  }
}

TEST(DiffusionSchedule, BlocksAreDenoisedLeftToRight) {
  for (Algorithm alg : {Algorithm::kLowConfidence, Algorithm::kEntropy, Algorithm::kOrigin}) {
    SamplerConfig c = Config(32, 16, 8, alg);
    Denoiser d(c, kVocab);
    const std::vector<float> logits = FlatPeakLogits(32);
    int last_block_begin = 0;
    while (!d.done()) {
      const auto [begin, end] = d.current_block();
      EXPECT_GE(begin, last_block_begin);
      // Everything before the current block is committed already.
      for (int p = 0; p < begin; ++p) EXPECT_TRUE(d.committed(p));
      for (int p = end; p < 32; ++p) EXPECT_FALSE(d.committed(p));
      last_block_begin = begin;
      d.Step(logits.data());
    }
  }
}

// Block-diffusion models: with block_offset the blocks sit on the absolute grid -- the first one
// finishes the prompt's last block, one more (block_offset long) ends the canvas -- and each block
// gets steps_per_block steps.
TEST(DiffusionSchedule, AnOffsetLaysBlocksOnTheAbsoluteGrid) {
  SamplerConfig c = Config(8, 8, 4, Algorithm::kLowConfidence);
  c.block_offset = 3;
  EXPECT_EQ(c.canvas_blocks(), 3);
  Denoiser d(c, kVocab);
  const std::vector<float> logits = FlatPeakLogits(8);
  std::vector<std::pair<int, int>> blocks;
  while (!d.done()) {
    if (blocks.empty() || blocks.back() != d.current_block()) blocks.push_back(d.current_block());
    d.Step(logits.data());
  }
  const std::vector<std::pair<int, int>> want = {{0, 1}, {1, 5}, {5, 8}};
  EXPECT_EQ(blocks, want);
  c.block_offset = 4;
  EXPECT_THROW(Validate(c), Error);
}

// Position p's target token gets probability probs[p] (the remaining mass spread evenly).
std::vector<float> LogitsWithProbabilities(const std::vector<double>& probs) {
  std::vector<float> logits(probs.size() * kVocab, 0.0f);
  for (size_t p = 0; p < probs.size(); ++p) {
    // p_target = e^x / (e^x + (V - 2)) with the mask token excluded -> x = log(q (V-2) / (1-q)).
    const double q = probs[p];
    logits[p * kVocab + p % 20] = static_cast<float>(std::log(q * (kVocab - 2) / (1 - q)));
    logits[p * kVocab + kMask] = -100.0f;
  }
  return logits;
}

TEST(DiffusionSchedule, ThresholdCommitsAllAboveAndAtLeastOne) {
  const int gen = 16;
  std::vector<double> probs(gen);
  for (int p = 0; p < gen; ++p) probs[p] = 0.3 + 0.04 * ((p * 7) % gen);  // 0.3 .. 0.9
  const std::vector<float> logits = LogitsWithProbabilities(probs);
  for (Algorithm alg : {Algorithm::kLowConfidence, Algorithm::kMaskgitPlus}) {
    SamplerConfig c = Config(gen, 4, 8, alg);
    c.threshold = 0.7f;
    Denoiser d(c, kVocab);
    int steps = 0;
    while (!d.done()) {
      const auto [begin, end] = d.current_block();
      std::vector<int> masked;
      for (int p = begin; p < end; ++p) {
        if (!d.committed(p)) masked.push_back(p);
      }
      const std::vector<int> got = d.Step(logits.data());
      ++steps;
      ASSERT_FALSE(got.empty());
      // Every masked position above the threshold is committed ...
      for (int p : masked) {
        if (probs[p] >= 0.7 + 1e-6) {
          EXPECT_TRUE(std::count(got.begin(), got.end(), p)) << "position " << p;
        }
      }
      // ... and below-threshold ones only as the single most confident fallback.
      int below = 0;
      for (int p : got) {
        EXPECT_GE(p, begin);
        EXPECT_LT(p, end);
        if (probs[p] < 0.7 - 1e-6) ++below;
      }
      if (below > 0) {
        EXPECT_EQ(got.size(), 1u);
        for (int p : masked) EXPECT_LE(probs[p], probs[got[0]] + 1e-9);
      }
    }
    // Threshold decoding runs each block until it is unmasked, independent of --steps.
    EXPECT_GT(steps, 4);
    for (int p = 0; p < gen; ++p) EXPECT_EQ(d.canvas()[p], p % 20);
  }
}

}  // namespace
}  // namespace bicache::diffusion
