// Attention for blocks of many query rows through oneDNN bf16 matmuls (ops.h AttentionSegments
// routes n_q >= kAttentionGemmMinRows here; fewer rows take the tiled fp32 kernel, attention.cpp).
//
// Per kv head g, once per call:  Kb, Vb: [nk, hd] bf16, the segments' rows gathered in order and
//                                zero rows up to nk = n_kv rounded up to kKvPad.
// Per work item (query head h, block of up to kQBlock query rows, padded to mp = multiple of 16):
//   Qb: [mp, hd] bf16 = q * scale          S = Qb * Kb^T : [mp, nk] f32   (oneDNN, f32 accumulate)
//   row-wise: m = max_j S, P = bf16(exp(S - m)) over the n_kv real columns (zero beyond),
//   l = sum_j exp(S - m) (f32)                     O = P * Vb : [mp, hd] f32      out = O / l
// The rounding points (Q*scale, K, V and P to bf16) are those of the trainer's bf16 autocast and of
// ref::AttentionBf16, which the tests compare against. Padding n_kv and the block to few distinct
// sizes keeps oneDNN's primitive cache to a handful of shapes per context length (each new shape is
// a JIT compile). Memory per thread: O(kQBlock * nk).
// clang-format off: Highway needs foreach_target.h, then highway.h, in this order
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention_gemm.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <omp.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/reference.h"
#include "util/grow.h"

HWY_BEFORE_NAMESPACE();
namespace bicache::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// exp(x) for x <= 0 to ~3e-6 relative (the result is rounded to bf16, 8 bits, right after):
// 2^(x log2 e) split into 2^n (exponent bits) and a degree-5 polynomial for 2^f, |f| <= 1/2.
// Inputs below -87 give exp(-87) ~ 1.6e-38 instead of smaller values; as softmax weights beside
// the row maximum's 1 both are nothing.
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V x) {
  const hn::RebindToSigned<D> di;
  x = hn::Max(x, hn::Set(d, -87.0f));
  const V y = hn::Mul(x, hn::Set(d, 1.44269504f));
  const V n = hn::Round(y);
  const V f = hn::Sub(y, n);
  V p = hn::Set(d, 1.33335581e-3f);
  p = hn::MulAdd(p, f, hn::Set(d, 9.61812911e-3f));
  p = hn::MulAdd(p, f, hn::Set(d, 5.55041087e-2f));
  p = hn::MulAdd(p, f, hn::Set(d, 2.40226507e-1f));
  p = hn::MulAdd(p, f, hn::Set(d, 6.93147181e-1f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
  const auto bits = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  return hn::Mul(p, hn::BitCast(d, bits));
}

// Softmax numerators of `rows` rows of scores s (stride ld, n columns): p[j] = bf16(exp(s[j] -
// max_j s)) (round to nearest even) for j < n and 0 for n <= j < ldp; sum[r] = the row's sum of
// the unrounded exps.
void SoftmaxRowsToBf16Impl(const float* s, size_t rows, size_t n, size_t ld, uint16_t* p,
                           size_t ldp, float* sum) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du32;
  const hn::RebindToSigned<decltype(df)> di32;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const size_t N = hn::Lanes(df);
  const auto bias = hn::Set(du32, 0x7FFFu);
  const auto one = hn::Set(du32, 1u);
  for (size_t r = 0; r < rows; ++r) {
    const float* sr = s + r * ld;
    uint16_t* pr = p + r * ldp;
    size_t j = 0;
    auto vmax = hn::Set(df, -std::numeric_limits<float>::infinity());
    for (; j + N <= n; j += N) vmax = hn::Max(vmax, hn::LoadU(df, sr + j));
    float m = hn::GetLane(hn::MaxOfLanes(df, vmax));
    for (; j < n; ++j) m = std::max(m, sr[j]);
    const auto vm = hn::Set(df, m);
    auto vsum = hn::Zero(df);
    for (j = 0; j + N <= n; j += N) {
      const auto e = ExpNonPositive(df, hn::Sub(hn::LoadU(df, sr + j), vm));
      vsum = hn::Add(vsum, e);
      const auto bits = hn::BitCast(du32, e);  // finite and positive: no NaN case
      const auto rounded =
          hn::ShiftRight<16>(hn::Add(bits, hn::Add(bias, hn::And(hn::ShiftRight<16>(bits), one))));
      hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, rounded)), du16, pr + j);
    }
    float tail = 0;
    for (; j < n; ++j) {
      const float e = std::exp(sr[j] - m);
      tail += e;
      pr[j] = ref::Bf16FromF32(e);
    }
    std::fill(pr + n, pr + ldp, uint16_t{0});
    sum[r] = hn::GetLane(hn::SumOfLanes(df, vsum)) + tail;
  }
}

}  // namespace bicache::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace bicache::kernels {
namespace {

HWY_EXPORT(SoftmaxRowsToBf16Impl);

constexpr size_t kKvPad = 64;    // n_kv rounded up to this
constexpr size_t kQBlock = 128;  // query rows per work item
constexpr size_t kRowPad = 16;   // block rows rounded up to this

size_t RoundUp(size_t x, size_t m) {
  return (x + m - 1) / m * m;
}

struct Buffers {
  std::vector<uint16_t> qb, p;      // [mp, hd], [mp, nk]
  std::vector<float> q, s, o, sum;  // [hd], [mp, nk], [mp, hd], [mp]
};

}  // namespace

void AttentionGemm(const float* q, size_t n_q, size_t q_stride, std::span<const KvSegment> segs,
                   size_t kv_stride, size_t n_head, size_t n_kv_head, size_t hd, float scale,
                   float* out, size_t out_stride, AttentionMask mask) {
  size_t n_kv = 0;
  for (const KvSegment& sg : segs) n_kv += sg.n;
  const size_t nk = RoundUp(n_kv, kKvPad);
  const size_t group = n_head / n_kv_head;

  // Kb, Vb: [n_kv_head, nk, hd] bf16, zero rows from n_kv on.
  thread_local std::vector<uint16_t> kb, vb;
  GrowTo(kb, n_kv_head * nk * hd);
  GrowTo(vb, n_kv_head * nk * hd);
  {
    size_t row = 0;
    for (const KvSegment& sg : segs) {
      for (size_t j = 0; j < sg.n; ++j, ++row) {
        for (size_t g = 0; g < n_kv_head; ++g) {
          F32ToBf16(sg.k + j * kv_stride + g * hd, kb.data() + (g * nk + row) * hd, hd);
          F32ToBf16(sg.v + j * kv_stride + g * hd, vb.data() + (g * nk + row) * hd, hd);
        }
      }
    }
    for (size_t g = 0; g < n_kv_head; ++g) {
      std::fill(kb.data() + (g * nk + n_kv) * hd, kb.data() + (g * nk + nk) * hd, uint16_t{0});
      std::fill(vb.data() + (g * nk + n_kv) * hd, vb.data() + (g * nk + nk) * hd, uint16_t{0});
    }
  }
  const uint16_t* kbp = kb.data();
  const uint16_t* vbp = vb.data();

  const size_t n_blocks = (n_q + kQBlock - 1) / kQBlock;
  const long n_items = static_cast<long>(n_blocks * n_head);
#pragma omp parallel for schedule(dynamic, 1)
  for (long item = 0; item < n_items; ++item) {
    const size_t h = static_cast<size_t>(item) / n_blocks;
    const size_t q0 = (static_cast<size_t>(item) % n_blocks) * kQBlock;
    const size_t rows = std::min(kQBlock, n_q - q0);
    const size_t mp = RoundUp(rows, kRowPad);
    const size_t g = h / group;
    // Block-causal: the block reads K/V rows [0, kv_end) only (kw columns, padded), and each row's
    // softmax covers its own visible rows; the rest of its columns get probability 0.
    const size_t kv_end = mask.KvEnd(q0 + rows - 1, n_kv);
    const size_t kw = std::min(nk, RoundUp(kv_end, kKvPad));
    thread_local Buffers b;
    uint16_t* qb = GrowTo(b.qb, mp * hd);
    uint16_t* p = GrowTo(b.p, mp * kw);
    float* qs = GrowTo(b.q, hd);
    float* s = GrowTo(b.s, mp * kw);
    float* o = GrowTo(b.o, mp * hd);
    float* sum = GrowTo(b.sum, mp);
    for (size_t r = 0; r < rows; ++r) {
      const float* __restrict qr = q + (q0 + r) * q_stride + h * hd;
      float* __restrict qsr = qs;
      for (size_t i = 0; i < hd; ++i) qsr[i] = qr[i] * scale;
      F32ToBf16(qs, qb + r * hd, hd);
    }
    std::fill(qb + rows * hd, qb + mp * hd, uint16_t{0});
    GemmBf16(qb, mp, hd, kbp + g * nk * hd, kw, /*b_transposed=*/true, s);  // S: [mp, kw]
    if (mask.block == 0) {
      HWY_DYNAMIC_DISPATCH(SoftmaxRowsToBf16Impl)(s, rows, n_kv, kw, p, kw, sum);
    } else {
      for (size_t r = 0; r < rows; ++r) {
        HWY_DYNAMIC_DISPATCH(SoftmaxRowsToBf16Impl)
        (s + r * kw, 1, mask.KvEnd(q0 + r, n_kv), kw, p + r * kw, kw, sum + r);
      }
    }
    std::fill(p + rows * kw, p + mp * kw, uint16_t{0});
    GemmBf16(p, mp, kw, vbp + g * nk * hd, hd, /*b_transposed=*/false, o);  // O: [mp, hd]
    for (size_t r = 0; r < rows; ++r) {
      float* __restrict dst = out + (q0 + r) * out_stride + h * hd;
      const float* __restrict src = o + r * hd;
      const float inv = 1.0f / sum[r];
      for (size_t i = 0; i < hd; ++i) dst[i] = src[i] * inv;
    }
  }
}

}  // namespace bicache::kernels
#endif  // HWY_ONCE
