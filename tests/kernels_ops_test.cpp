// Optimised row/element kernels (kernels/ops.h) against their scalar twins (kernels/reference.h)
// on sizes that exercise both the vector body and the scalar tail.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/reference.h"
#include "test_util.h"
#include "util/error.h"

namespace bicache::kernels {
namespace {

using bicache::testing::ExpectNear;
using bicache::testing::Random;

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
float FromBits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

const size_t kSizes[] = {1, 7, 33, 257};

TEST(KernelsOps, RmsNormMatchesReference) {
  for (size_t d : kSizes) {
    const size_t rows = 3;
    auto x = Random(rows * d, 1 + d, -3, 3), w = Random(d, 2 + d, 0.5, 1.5);
    std::vector<float> got(rows * d), want(rows * d);
    RmsNorm(x.data(), w.data(), got.data(), rows, d, 1e-5f);
    ref::RmsNorm(x.data(), w.data(), want.data(), rows, d, 1e-5f);
    ExpectNear(got, want, 1e-5f, 1e-6f, "rmsnorm d=" + std::to_string(d));
    RmsNorm(x.data(), w.data(), x.data(), rows, d, 1e-5f);  // in place
    ExpectNear(x, want, 1e-5f, 1e-6f, "rmsnorm in place d=" + std::to_string(d));
  }
}

TEST(KernelsOps, SwiGluMatchesReference) {
  for (size_t n : kSizes) {
    auto g = Random(n, 3 + n, -8, 8), u = Random(n, 4 + n, -2, 2);
    std::vector<float> got(n), want(n);
    SwiGlu(g.data(), u.data(), got.data(), n);
    ref::SwiGlu(g.data(), u.data(), want.data(), n);
    ExpectNear(got, want, 1e-5f, 1e-6f, "swiglu n=" + std::to_string(n));
    SwiGlu(g.data(), u.data(), g.data(), n);  // out aliases gate
    ExpectNear(g, want, 1e-5f, 1e-6f, "swiglu aliased n=" + std::to_string(n));
  }
}

TEST(KernelsOps, AddInPlaceAndBiasRows) {
  for (size_t n : kSizes) {
    const auto y0 = Random(2 * n, 5 + n), x = Random(2 * n, 6 + n), b = Random(n, 7 + n);
    auto y = y0, yb = y0;
    AddInPlace(y.data(), x.data(), 2 * n);
    AddBiasRows(yb.data(), b.data(), 2, n);
    for (size_t i = 0; i < 2 * n; ++i) {
      ASSERT_EQ(y[i], y0[i] + x[i]) << "n=" << n << " i=" << i;
      ASSERT_EQ(yb[i], y0[i] + b[i % n]) << "n=" << n << " i=" << i;
    }
  }
}

TEST(KernelsOps, SoftmaxMatchesReferenceAndIsStable) {
  for (size_t n : kSizes) {
    auto x = Random(n, 8 + n, -20, 20);
    auto want = x;
    Softmax(x.data(), n);
    ref::Softmax(want.data(), n);
    ExpectNear(x, want, 1e-5f, 1e-7f, "softmax n=" + std::to_string(n));
    double sum = 0;
    for (float p : x) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  std::vector<float> big = {1000.0f, 999.0f,  1000.0f, -1000.0f, 998.0f,  1000.0f,
                            0.0f,    1.0f,    1000.0f, 1000.0f,  1000.0f, 1000.0f,
                            1000.0f, 1000.0f, 1000.0f, 1000.0f,  1000.0f, 3.0f};
  auto want = big;
  Softmax(big.data(), big.size());
  ref::Softmax(want.data(), want.size());
  for (float p : big) ASSERT_TRUE(std::isfinite(p));
  ExpectNear(big, want, 1e-5f, 1e-7f, "softmax large logits");
}

TEST(KernelsOps, Bf16RoundsToNearestEvenAndKeepsNaN) {
  // Hand-picked cases, then padded to 37 values so vector body and tail both see them.
  std::vector<float> x = {
      1.0f,
      FromBits(0x3F808000u),  // exactly halfway, even below -> 0x3F80
      FromBits(0x3F818000u),  // exactly halfway, odd below -> rounds up to 0x3F82
      FromBits(0x3F808001u),  // just above halfway -> 0x3F81
      -0.0f,
      std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(),
      std::numeric_limits<float>::max(),  // rounds to +inf
      std::numeric_limits<float>::quiet_NaN(),
      FromBits(0x7F800001u),  // signalling NaN whose payload sits in the dropped half
      FromBits(0x00000001u),  // smallest subnormal -> +0
  };
  auto more = Random(37 - x.size(), 9, -1e6, 1e6);
  x.insert(x.end(), more.begin(), more.end());
  std::vector<float> rot = x;  // same values shifted so specials also land in the vector body
  std::rotate(rot.begin(), rot.begin() + 20, rot.end());
  for (const auto* in : {&x, &rot}) {
    std::vector<uint16_t> got(in->size());
    F32ToBf16(in->data(), got.data(), in->size());
    for (size_t i = 0; i < in->size(); ++i) {
      const float v = (*in)[i];
      if (std::isnan(v)) {
        EXPECT_TRUE(std::isnan(ref::F32FromBf16(got[i]))) << "NaN lost at " << i;
      } else {
        EXPECT_EQ(got[i], ref::Bf16FromF32(v)) << "value " << v;
      }
    }
  }
  EXPECT_EQ(ref::Bf16FromF32(FromBits(0x3F808000u)), 0x3F80);
  EXPECT_EQ(ref::Bf16FromF32(FromBits(0x3F818000u)), 0x3F82);
  EXPECT_EQ(ref::Bf16FromF32(FromBits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(ref::Bf16FromF32(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_TRUE(std::isnan(ref::F32FromBf16(ref::Bf16FromF32(FromBits(0x7F800001u)))));
}

TEST(KernelsOps, HalfConversionsCoverEveryBitPattern) {
  std::vector<uint16_t> all(65536 + 3);  // +3 so the last values go through the scalar tail
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> bf(all.size()), hf(all.size());
  Bf16ToF32(all.data(), bf.data(), all.size());
  F16ToF32(all.data(), hf.data(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_EQ(Bits(bf[i]), Bits(ref::F32FromBf16(all[i]))) << "bf16 " << i;
    const float want = ref::F32FromF16(all[i]);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(hf[i])) << "f16 " << i;
    } else {
      ASSERT_EQ(Bits(hf[i]), Bits(want)) << "f16 " << i;
    }
  }
  EXPECT_EQ(ref::F32FromF16(0x3C00), 1.0f);
  EXPECT_EQ(ref::F32FromF16(0xC000), -2.0f);
  EXPECT_EQ(ref::F32FromF16(0x7BFF), 65504.0f);
  EXPECT_EQ(ref::F32FromF16(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(ref::F32FromF16(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(ref::F32FromF16(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ref::F32FromF16(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(ref::F32FromF16(0x7E00)));
  EXPECT_TRUE(std::signbit(ref::F32FromF16(0x8000)));
}

// ---- Rope -----------------------------------------------------------------------------------

TEST(KernelsOps, RopeMatchesReferenceBothLayouts) {
  const std::vector<int32_t> pos = {0, 1, 7, 511, 4095, 4096, 8191};
  for (size_t hd : {16, 64, 128}) {
    for (float base : {10000.0f, 500000.0f}) {
      for (RopeLayout layout : {RopeLayout::kNormal, RopeLayout::kNeox}) {
        const size_t n_head = 3, stride = n_head * hd + 5;  // 5 floats of row padding
        auto x = Random(pos.size() * stride, static_cast<uint32_t>(hd + base));
        auto want = x;
        Rope(x.data(), pos.size(), stride, n_head, hd, pos.data(), base, layout);
        ref::Rope(want.data(), pos.size(), stride, n_head, hd, pos.data(), base, layout);
        ExpectNear(x, want, 1e-6f, 1e-6f, "rope hd=" + std::to_string(hd));
      }
    }
  }
}

TEST(KernelsOps, RopePositionZeroIsIdentityAndNormIsKept) {
  const size_t hd = 64;
  auto x = Random(2 * hd, 11);
  auto orig = x;
  const int32_t pos[2] = {0, 3000};
  Rope(x.data(), 2, hd, 1, hd, pos, 10000.0f, RopeLayout::kNeox);
  for (size_t i = 0; i < hd; ++i) EXPECT_EQ(x[i], orig[i]);
  for (size_t i = 0; i < hd / 2; ++i) {  // each rotated pair keeps its length
    const float* a = orig.data() + hd;
    const float* b = x.data() + hd;
    EXPECT_NEAR(a[i] * a[i] + a[i + hd / 2] * a[i + hd / 2],
                b[i] * b[i] + b[i + hd / 2] * b[i + hd / 2], 1e-5f);
  }
}

TEST(KernelsOps, RopeNormalEqualsNeoxUnderPairPermutation) {
  // perm maps the NeoX layout (i, i+half) onto adjacent pairs (2i, 2i+1).
  for (size_t hd : {16, 64, 128}) {
    const size_t half = hd / 2;
    const std::vector<int32_t> pos = {3, 100, 4097};
    auto x = Random(pos.size() * hd, static_cast<uint32_t>(17 + hd));
    std::vector<float> permuted(x.size());
    for (size_t t = 0; t < pos.size(); ++t) {
      for (size_t i = 0; i < half; ++i) {
        permuted[t * hd + 2 * i] = x[t * hd + i];
        permuted[t * hd + 2 * i + 1] = x[t * hd + i + half];
      }
    }
    Rope(x.data(), pos.size(), hd, 1, hd, pos.data(), 10000.0f, RopeLayout::kNeox);
    Rope(permuted.data(), pos.size(), hd, 1, hd, pos.data(), 10000.0f, RopeLayout::kNormal);
    for (size_t t = 0; t < pos.size(); ++t) {
      for (size_t i = 0; i < half; ++i) {
        EXPECT_NEAR(permuted[t * hd + 2 * i], x[t * hd + i], 1e-6f);
        EXPECT_NEAR(permuted[t * hd + 2 * i + 1], x[t * hd + i + half], 1e-6f);
      }
    }
  }
}

TEST(KernelsOps, RopeHandlesPositionsOutsideTheTable) {
  const size_t hd = 32;
  const std::vector<int32_t> pos = {-5, 300000, 2, 1 << 30};
  auto x = Random(pos.size() * hd, 23);
  auto want = x;
  Rope(x.data(), pos.size(), hd, 1, hd, pos.data(), 10000.0f, RopeLayout::kNormal);
  ref::Rope(want.data(), pos.size(), hd, 1, hd, pos.data(), 10000.0f, RopeLayout::kNormal);
  ExpectNear(x, want, 1e-6f, 1e-6f, "rope far positions");
}

TEST(KernelsOps, RopeRejectsOddHeadDim) {
  std::vector<float> x(7);
  const int32_t pos = 1;
  try {
    Rope(x.data(), 1, 7, 1, 7, &pos, 10000.0f, RopeLayout::kNeox);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

// ---- Attention ------------------------------------------------------------------------------

struct AttnCase {
  size_t n_q, n_kv, n_head, n_kv_head, hd;
};

void CheckAttention(const AttnCase& c, float q_scale = 1.0f) {
  const size_t qs = c.n_head * c.hd + 3, kvs = c.n_kv_head * c.hd + 5, os = c.n_head * c.hd + 2;
  const uint32_t seed = static_cast<uint32_t>(c.n_q * 1000 + c.n_kv * 10 + c.hd + c.n_kv_head);
  auto q = Random(c.n_q * qs, seed, -q_scale, q_scale);
  auto k = Random(c.n_kv * kvs, seed + 1), v = Random(c.n_kv * kvs, seed + 2);
  const float sentinel = 12345.0f;
  std::vector<float> got(c.n_q * os, sentinel), want(c.n_q * os, sentinel);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  Attention(q.data(), c.n_q, qs, k.data(), v.data(), c.n_kv, kvs, c.n_head, c.n_kv_head, c.hd,
            scale, got.data(), os);
  ref::Attention(q.data(), c.n_q, qs, k.data(), v.data(), c.n_kv, kvs, c.n_head, c.n_kv_head, c.hd,
                 scale, want.data(), os);
  const std::string what = "attention n_q=" + std::to_string(c.n_q) +
                           " n_kv=" + std::to_string(c.n_kv) +
                           " heads=" + std::to_string(c.n_head) + "/" +
                           std::to_string(c.n_kv_head) + " hd=" + std::to_string(c.hd);
  ExpectNear(got, want, 1e-5f, 1e-5f, what);  // padding columns must still hold the sentinel
}

TEST(KernelsOps, AttentionMatchesReference) {
  for (size_t hd : {16, 64, 128}) {
    for (size_t n_kv : {1, 5, 130}) {
      for (auto [nh, nkv] : {std::pair<size_t, size_t>{4, 4}, {4, 2}, {4, 1}}) {
        // <= 16 query rows take the transposed-query path, 17 and more the packed-K one.
        for (size_t n_q : {1, 7, 16, 17, 37}) CheckAttention({n_q, n_kv, nh, nkv, hd});
      }
    }
  }
}

// Blocks of >= kAttentionGemmMinRows query rows go through oneDNN bf16 matmuls: compared with the
// scalar reference at the same bf16 rounding points (a flipped bf16 rounding of one softmax weight
// is ~0.4% of it, hence the tolerance), and checked to be close to the exact fp32 result too.
void CheckAttentionGemm(const AttnCase& c, float q_scale = 1.0f) {
  ASSERT_GE(c.n_q, kAttentionGemmMinRows);
  const size_t qs = c.n_head * c.hd + 3, kvs = c.n_kv_head * c.hd + 5, os = c.n_head * c.hd + 2;
  const uint32_t seed = static_cast<uint32_t>(c.n_q * 1000 + c.n_kv * 10 + c.hd + c.n_kv_head);
  auto q = Random(c.n_q * qs, seed, -q_scale, q_scale);
  auto k = Random(c.n_kv * kvs, seed + 1), v = Random(c.n_kv * kvs, seed + 2);
  const float sentinel = 12345.0f;
  std::vector<float> got(c.n_q * os, sentinel), want(c.n_q * os, sentinel),
      exact(c.n_q * os, sentinel);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  Attention(q.data(), c.n_q, qs, k.data(), v.data(), c.n_kv, kvs, c.n_head, c.n_kv_head, c.hd,
            scale, got.data(), os);
  ref::AttentionBf16(q.data(), c.n_q, qs, k.data(), v.data(), c.n_kv, kvs, c.n_head, c.n_kv_head,
                     c.hd, scale, want.data(), os);
  ref::Attention(q.data(), c.n_q, qs, k.data(), v.data(), c.n_kv, kvs, c.n_head, c.n_kv_head, c.hd,
                 scale, exact.data(), os);
  const std::string what = "gemm attention n_q=" + std::to_string(c.n_q) +
                           " n_kv=" + std::to_string(c.n_kv) +
                           " heads=" + std::to_string(c.n_head) + "/" +
                           std::to_string(c.n_kv_head) + " hd=" + std::to_string(c.hd);
  ExpectNear(got, want, 5e-3f, 2e-3f,
             what + " vs bf16 reference");  // padding columns keep the sentinel
  ExpectNear(got, exact, 3e-2f, 2e-2f, what + " vs fp32 reference");
}

TEST(KernelsOps, AttentionManyQueryRowsMatchesBf16Reference) {
  for (size_t hd : {40, 64, 128}) {
    for (size_t n_kv : {64, 100, 300}) {
      for (auto [nh, nkv] : {std::pair<size_t, size_t>{4, 4}, {4, 1}}) {
        for (size_t n_q : {64, 130}) CheckAttentionGemm({n_q, n_kv, nh, nkv, hd});
      }
    }
  }
  CheckAttentionGemm({200, 70, 2, 2, 64}, /*q_scale=*/8.0f);  // sharp softmax
}

TEST(KernelsOps, AttentionOddHeadDimAndLargeScores) {
  CheckAttention({9, 70, 2, 1, 24});
  CheckAttention({5, 200, 2, 2, 40}, /*q_scale=*/30.0f);  // sharp softmax: scores up to ~200
}

// K/V split into pieces that lie in different buffers (a partial layer: cached prefix rows, the
// rows computed this step, cached rows after them) must attend exactly as the rows concatenated,
// against the scalar reference; empty pieces and pieces that straddle kv tiles included.
TEST(KernelsOps, AttentionSegmentsMatchReferenceOnTheConcatenation) {
  const size_t hd = 64, n_head = 4, n_kv_head = 2, kvs = n_kv_head * hd + 3, qs = n_head * hd;
  for (auto split : {std::vector<size_t>{150, 40, 0}, {0, 37, 100}, {70, 1, 69}, {63, 2, 65, 5}}) {
    size_t n_kv = 0;
    for (size_t n : split) n_kv += n;
    for (size_t n_q : {1, 8, 40, 70}) {
      const uint32_t seed = static_cast<uint32_t>(n_kv * 7 + n_q);
      auto q = Random(n_q * qs, seed), k = Random(n_kv * kvs, seed + 1),
           v = Random(n_kv * kvs, seed + 2);
      // Each piece copied into a buffer of its own, so a read outside a piece would hit other
      // memory.
      std::vector<std::vector<float>> kb, vb;
      std::vector<KvSegment> segs;
      size_t row = 0;
      for (size_t n : split) {
        kb.emplace_back(k.begin() + row * kvs, k.begin() + (row + n) * kvs);
        vb.emplace_back(v.begin() + row * kvs, v.begin() + (row + n) * kvs);
        row += n;
      }
      for (size_t i = 0; i < split.size(); ++i)
        segs.push_back({kb[i].data(), vb[i].data(), split[i]});
      std::vector<float> got(n_q * qs), want(n_q * qs);
      AttentionSegments(q.data(), n_q, qs, segs, kvs, n_head, n_kv_head, hd, 0.125f, got.data(),
                        qs);
      const bool gemm = n_q >= kAttentionGemmMinRows && n_kv >= kAttentionGemmMinKv;
      (gemm ? ref::AttentionBf16 : ref::Attention)(q.data(), n_q, qs, k.data(), v.data(), n_kv, kvs,
                                                   n_head, n_kv_head, hd, 0.125f, want.data(), qs);
      ExpectNear(got, want, gemm ? 5e-3f : 1e-5f, gemm ? 2e-3f : 1e-5f,
                 "attention segments n_q=" + std::to_string(n_q));
    }
  }
}

TEST(KernelsOps, AttentionSegmentsRejectTooManyPieces) {
  std::vector<float> q(64), k(64), v(64), out(64);
  std::vector<KvSegment> segs(kMaxKvSegments + 1, KvSegment{k.data(), v.data(), 1});
  EXPECT_THROW(AttentionSegments(q.data(), 1, 64, segs, 64, 1, 1, 64, 0.125f, out.data(), 64),
               Error);
}

TEST(KernelsOps, AttentionWithOneKvTokenReturnsV) {
  const size_t hd = 64, n_head = 4, n_kv_head = 2, n_q = 5;
  auto q = Random(n_q * n_head * hd, 31), k = Random(n_kv_head * hd, 32),
       v = Random(n_kv_head * hd, 33);
  std::vector<float> out(n_q * n_head * hd);
  Attention(q.data(), n_q, n_head * hd, k.data(), v.data(), 1, n_kv_head * hd, n_head, n_kv_head,
            hd, 0.125f, out.data(), n_head * hd);
  for (size_t t = 0; t < n_q; ++t) {
    for (size_t h = 0; h < n_head; ++h) {
      for (size_t i = 0; i < hd; ++i) {
        ASSERT_FLOAT_EQ(out[(t * n_head + h) * hd + i], v[(h / 2) * hd + i]);
      }
    }
  }
}

TEST(KernelsOps, AttentionRejectsBadHeadGrouping) {
  std::vector<float> buf(64, 0.0f);
  try {
    Attention(buf.data(), 1, 12, buf.data(), buf.data(), 1, 8, 3, 2, 4, 1.0f, buf.data(), 12);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

TEST(KernelsOps, AttentionWithNoKvIsZero) {
  std::vector<float> q(16, 1.0f), out(16, 5.0f);
  Attention(q.data(), 2, 8, nullptr, nullptr, 0, 8, 2, 2, 4, 1.0f, out.data(), 8);
  for (float x : out) EXPECT_EQ(x, 0.0f);
}

// The binary picks its SIMD target at run time; pin each target this CPU supports in turn so the
// AVX2 / SSE4 code paths (used on CPUs without AVX-512) are exercised too.
TEST(KernelsOps, EveryCompiledSimdTargetMatchesReference) {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    hwy::SupportedTargets();  // re-selects the dispatched implementation
    for (size_t n : kSizes) {
      auto x = Random(n, 41 + n, -5, 5), w = Random(n, 42 + n);
      std::vector<float> got(n), want(n);
      RmsNorm(x.data(), w.data(), got.data(), 1, n, 1e-6f);
      ref::RmsNorm(x.data(), w.data(), want.data(), 1, n, 1e-6f);
      ExpectNear(got, want, 1e-5f, 1e-6f, "rmsnorm");
      SwiGlu(x.data(), w.data(), got.data(), n);
      ref::SwiGlu(x.data(), w.data(), want.data(), n);
      ExpectNear(got, want, 1e-5f, 1e-6f, "swiglu");
      got = x;
      want = x;
      Softmax(got.data(), n);
      ref::Softmax(want.data(), n);
      ExpectNear(got, want, 1e-5f, 1e-7f, "softmax");
      std::vector<uint16_t> b(n);
      F32ToBf16(x.data(), b.data(), n);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], ref::Bf16FromF32(x[i]));
    }
    std::vector<uint16_t> all(65536);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
    std::vector<float> hf(all.size());
    F16ToF32(all.data(), hf.data(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const float want = ref::F32FromF16(all[i]);
      ASSERT_TRUE(std::isnan(want) ? std::isnan(hf[i]) : Bits(hf[i]) == Bits(want)) << i;
    }
    CheckAttention({37, 130, 4, 2, 64});
    CheckAttention({3, 5, 2, 1, 24});
    // Few query rows: one or two lane groups (vector length 16, 8, 4, 1), V rows read in place
    // (hd 64) or padded (hd 24, 40 are not whole vectors on every target).
    CheckAttention({8, 130, 4, 4, 64});
    CheckAttention({16, 70, 4, 2, 64});
    CheckAttention({12, 130, 4, 1, 24});
    CheckAttention({5, 200, 2, 2, 40});
    CheckAttentionGemm({70, 100, 4, 2, 64});  // softmax rows (Highway) on this target
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::SupportedTargets();
}

}  // namespace
}  // namespace bicache::kernels
