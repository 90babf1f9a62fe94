// Block-causal attention (kernels::AttentionMask) on every attention path against the scalar
// reference: the few-row transposed-query path (<= 16 rows), the tiled path (17-63 rows), the
// oneDNN path (>= 64 rows, compared at its bf16 rounding points), and K/V held in segments.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/reference.h"
#include "test_util.h"

namespace bicache::kernels {
namespace {

using bicache::testing::ExpectNear;
using bicache::testing::Random;

TEST(KernelsAttentionMask, KvEndIsTheEndOfTheQueryRowsBlock) {
  const AttentionMask bidi;
  EXPECT_EQ(bidi.KvEnd(0, 10), 10u);
  const AttentionMask m{4, 6};  // query row 0 at position 6: block [4, 8)
  EXPECT_EQ(m.KvEnd(0, 100), 8u);
  EXPECT_EQ(m.KvEnd(1, 100), 8u);   // position 7
  EXPECT_EQ(m.KvEnd(2, 100), 12u);  // position 8: the next block
  EXPECT_EQ(m.KvEnd(2, 10), 10u);   // clipped to the K/V rows there are
}

// The reference skips masked rows outright: the same as attending to the visible prefix alone.
TEST(KernelsAttentionMask, ReferenceEqualsAttendingToTheVisibleRowsOnly) {
  const size_t hd = 16, nh = 2, nkv = 1, qs = nh * hd, kvs = nkv * hd, n_kv = 23;
  auto q = Random(5 * qs, 1), k = Random(n_kv * kvs, 2), v = Random(n_kv * kvs, 3);
  const AttentionMask m{4, 9};  // rows at positions 9..13
  std::vector<float> got(5 * qs), want(qs);
  ref::AttentionMasked(q.data(), 5, qs, k.data(), v.data(), n_kv, kvs, nh, nkv, hd, 0.25f,
                       got.data(), qs, m);
  for (size_t t = 0; t < 5; ++t) {
    const size_t end = ((9 + t) / 4 + 1) * 4;
    ref::Attention(&q[t * qs], 1, qs, k.data(), v.data(), end, kvs, nh, nkv, hd, 0.25f, want.data(),
                   qs);
    ExpectNear(std::vector<float>(got.begin() + t * qs, got.begin() + (t + 1) * qs), want, 1e-6f,
               1e-7f, "row " + std::to_string(t));
  }
}

struct MaskCase {
  size_t n_q, n_kv, block, q_pos0;
};

void CheckMasked(const MaskCase& c, size_t hd, size_t nh, size_t nkv) {
  const size_t qs = nh * hd + 3, kvs = nkv * hd + 5, os = nh * hd + 2;
  const uint32_t seed = static_cast<uint32_t>(c.n_q * 131 + c.n_kv * 7 + c.block + c.q_pos0 + hd);
  auto q = Random(c.n_q * qs, seed), k = Random(c.n_kv * kvs, seed + 1),
       v = Random(c.n_kv * kvs, seed + 2);
  const AttentionMask mask{c.block, c.q_pos0};
  const float sentinel = 12345.0f, scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> got(c.n_q * os, sentinel), want(c.n_q * os, sentinel);
  Attention(q.data(), c.n_q, qs, k.data(), v.data(), c.n_kv, kvs, nh, nkv, hd, scale, got.data(),
            os, mask);
  const bool gemm = c.n_q >= kAttentionGemmMinRows && c.n_kv >= kAttentionGemmMinKv;
  (gemm ? ref::AttentionBf16Masked : ref::AttentionMasked)(q.data(), c.n_q, qs, k.data(), v.data(),
                                                           c.n_kv, kvs, nh, nkv, hd, scale,
                                                           want.data(), os, mask);
  const std::string what = "masked attention n_q=" + std::to_string(c.n_q) +
                           " n_kv=" + std::to_string(c.n_kv) + " block=" + std::to_string(c.block) +
                           " q_pos0=" + std::to_string(c.q_pos0) + " hd=" + std::to_string(hd);
  ExpectNear(got, want, gemm ? 5e-3f : 1e-5f, gemm ? 2e-3f : 1e-5f, what);
}

// A full forward (q_pos0 0, n_q = n_kv), and the computed tail of a cached forward (q_pos0 > 0,
// the K/V rows of every position before and through the tail), on each path.
TEST(KernelsAttentionMask, EveryPathMatchesTheReference) {
  for (size_t hd : {16, 64}) {
    for (auto [nh, nkv] : {std::pair<size_t, size_t>{4, 4}, {4, 2}}) {
      for (size_t block : {1, 4, 8, 32}) {
        for (size_t n : {1, 7, 16, 17, 40, 64, 130}) CheckMasked({n, n, block, 0}, hd, nh, nkv);
        // tails: few rows, tiled rows, oneDNN rows, starting mid-block and on a boundary
        for (auto [n_q, q0] : {std::pair<size_t, size_t>{5, 43}, {16, 64}, {30, 21}, {70, 66}}) {
          CheckMasked({n_q, q0 + n_q + block, block, q0}, hd, nh, nkv);  // K/V past the tail
          CheckMasked({n_q, q0 + n_q, block, q0}, hd, nh, nkv);
        }
      }
    }
  }
}

// Block-causal attention over K/V in segments (cached rows before and after the computed ones)
// equals the reference on the concatenation.
TEST(KernelsAttentionMask, SegmentsMatchTheReference) {
  const size_t hd = 32, nh = 4, nkv = 2, kvs = nkv * hd, qs = nh * hd;
  for (auto [before, n_q, after] :
       {std::tuple<size_t, size_t, size_t>{24, 8, 40}, {8, 40, 16}, {0, 72, 8}, {64, 3, 1}}) {
    const size_t n_kv = before + n_q + after;
    auto q = Random(n_q * qs, 11), k = Random(n_kv * kvs, 12), v = Random(n_kv * kvs, 13);
    const KvSegment segs[3] = {
        {k.data(), v.data(), before},
        {k.data() + before * kvs, v.data() + before * kvs, n_q},
        {k.data() + (before + n_q) * kvs, v.data() + (before + n_q) * kvs, after}};
    const AttentionMask mask{8, before};
    std::vector<float> got(n_q * qs), want(n_q * qs);
    AttentionSegments(q.data(), n_q, qs, segs, kvs, nh, nkv, hd, 0.2f, got.data(), qs, mask);
    const bool gemm = n_q >= kAttentionGemmMinRows && n_kv >= kAttentionGemmMinKv;
    (gemm ? ref::AttentionBf16Masked : ref::AttentionMasked)(
        q.data(), n_q, qs, k.data(), v.data(), n_kv, kvs, nh, nkv, hd, 0.2f, want.data(), qs, mask);
    ExpectNear(got, want, gemm ? 5e-3f : 1e-5f, gemm ? 2e-3f : 1e-5f,
               "segments before=" + std::to_string(before) + " n_q=" + std::to_string(n_q));
  }
}

}  // namespace
}  // namespace bicache::kernels
