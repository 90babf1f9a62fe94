// Element-wise and row kernels (ops.h) in Highway, compiled once per SIMD target and picked at
// run time (HWY_DYNAMIC_DISPATCH), so the binary runs on CPUs with and without AVX-512.
// Tails shorter than one vector fall back to the scalar formula; results then differ from the
// vector lanes only by the last ulp of exp.

// clang-format off: Highway needs foreach_target.h, then highway.h, in this order
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops_hwy.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>
// clang-format on

#include <cmath>
#include <cstring>

#include "kernels/ops.h"
#include "kernels/reference.h"

HWY_BEFORE_NAMESPACE();
namespace bicache::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

void RmsNormImpl(const float* x, const float* w, float* out, size_t rows, size_t d, float eps) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = out + r * d;
    // Two accumulators hide the FMA latency; the sum of squares is the only reduction.
    auto a0 = hn::Zero(df), a1 = hn::Zero(df);
    size_t i = 0;
    for (; i + 2 * N <= d; i += 2 * N) {
      const auto v0 = hn::LoadU(df, xr + i), v1 = hn::LoadU(df, xr + i + N);
      a0 = hn::MulAdd(v0, v0, a0);
      a1 = hn::MulAdd(v1, v1, a1);
    }
    for (; i + N <= d; i += N) {
      const auto v0 = hn::LoadU(df, xr + i);
      a0 = hn::MulAdd(v0, v0, a0);
    }
    float ss = hn::GetLane(hn::SumOfLanes(df, hn::Add(a0, a1)));
    for (; i < d; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(d) + eps);
    const auto vinv = hn::Set(df, inv);
    i = 0;
    for (; i + N <= d; i += N) {
      hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, xr + i), vinv), hn::LoadU(df, w + i)), df, yr + i);
    }
    for (; i < d; ++i) yr[i] = xr[i] * inv * w[i];
  }
}

void SwiGluImpl(const float* gate, const float* up, float* out, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto one = hn::Set(df, 1.0f);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto g = hn::LoadU(df, gate + i);
    const auto sig = hn::Div(one, hn::Add(one, hn::Exp(df, hn::Neg(g))));  // silu = g*sigmoid(g)
    hn::StoreU(hn::Mul(hn::Mul(g, sig), hn::LoadU(df, up + i)), df, out + i);
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void AddInPlaceImpl(float* y, const float* x, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Add(hn::LoadU(df, y + i), hn::LoadU(df, x + i)), df, y + i);
  }
  for (; i < n; ++i) y[i] += x[i];
}

void SoftmaxImpl(float* x, size_t n) {
  if (n == 0) return;
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  float m = x[0];
  if (n >= N) {
    auto vm = hn::LoadU(df, x);
    for (i = N; i + N <= n; i += N) vm = hn::Max(vm, hn::LoadU(df, x + i));
    m = hn::GetLane(hn::MaxOfLanes(df, vm));
  }
  for (; i < n; ++i) m = std::max(m, x[i]);
  const auto vmax = hn::Set(df, m);
  auto vsum = hn::Zero(df);
  for (i = 0; i + N <= n; i += N) {
    const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, x + i), vmax));
    vsum = hn::Add(vsum, e);
    hn::StoreU(e, df, x + i);
  }
  float sum = hn::GetLane(hn::SumOfLanes(df, vsum));
  for (; i < n; ++i) sum += x[i] = std::exp(x[i] - m);
  const float inv = 1.0f / sum;
  const auto vinv = hn::Set(df, inv);
  for (i = 0; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), vinv), df, x + i);
  for (; i < n; ++i) x[i] *= inv;
}

void F32ToBf16Impl(const float* src, uint16_t* dst, size_t n) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t N = hn::Lanes(df);
  const auto bias = hn::Set(du32, 0x7FFFu);
  const auto one = hn::Set(du32, 1u);
  const auto quiet = hn::Set(du32, 0x40u);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(df, src + i);
    const auto bits = hn::BitCast(du32, v);
    const auto hi = hn::ShiftRight<16>(bits);
    // Round to nearest even: add 0x7FFF plus the lsb of the kept half, then truncate.
    const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(bias, hn::And(hi, one))));
    const auto res = hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(v)), hn::Or(hi, quiet), rounded);
    // Values are <= 0xFFFF, so the saturating i32 -> u16 demotion is exact.
    hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, res)), du16, dst + i);
  }
  for (; i < n; ++i) dst[i] = ref::Bf16FromF32(src[i]);
}

void Bf16ToF32Impl(const uint16_t* src, float* dst, size_t n) {
  const DF df;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto w = hn::PromoteTo(du32, hn::LoadU(du16, src + i));
    hn::StoreU(hn::BitCast(df, hn::ShiftLeft<16>(w)), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = ref::F32FromBf16(src[i]);
}

void F16ToF32Impl(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  // F16C converts exactly (subnormals, inf, NaN). Highway's SSE4 emulation mishandles inf/NaN,
  // so older targets take the scalar path below; this only runs when loading F16 weights.
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const size_t N = hn::Lanes(df);
  const hwy::float16_t* h = reinterpret_cast<const hwy::float16_t*>(src);
  for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, h + i)), df, dst + i);
#endif
  for (; i < n; ++i) dst[i] = ref::F32FromF16(src[i]);
}

}  // namespace bicache::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "util/error.h"

namespace bicache::kernels {

HWY_EXPORT(RmsNormImpl);
HWY_EXPORT(SwiGluImpl);
HWY_EXPORT(AddInPlaceImpl);
HWY_EXPORT(SoftmaxImpl);
HWY_EXPORT(F32ToBf16Impl);
HWY_EXPORT(Bf16ToF32Impl);
HWY_EXPORT(F16ToF32Impl);

void RmsNorm(const float* x, const float* w, float* out, size_t rows, size_t d, float eps) {
  HWY_DYNAMIC_DISPATCH(RmsNormImpl)(x, w, out, rows, d, eps);
}
void SwiGlu(const float* gate, const float* up, float* out, size_t n) {
  HWY_DYNAMIC_DISPATCH(SwiGluImpl)(gate, up, out, n);
}
void AddInPlace(float* y, const float* x, size_t n) {
  HWY_DYNAMIC_DISPATCH(AddInPlaceImpl)(y, x, n);
}
void AddBiasRows(float* y, const float* b, size_t rows, size_t d) {
  for (size_t r = 0; r < rows; ++r) HWY_DYNAMIC_DISPATCH(AddInPlaceImpl)(y + r * d, b, d);
}
void Softmax(float* x, size_t n) {
  HWY_DYNAMIC_DISPATCH(SoftmaxImpl)(x, n);
}
void F32ToBf16(const float* src, uint16_t* dst, size_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToBf16Impl)(src, dst, n);
}
void Bf16ToF32(const uint16_t* src, float* dst, size_t n) {
  HWY_DYNAMIC_DISPATCH(Bf16ToF32Impl)(src, dst, n);
}
void F16ToF32(const uint16_t* src, float* dst, size_t n) {
  HWY_DYNAMIC_DISPATCH(F16ToF32Impl)(src, dst, n);
}

}  // namespace bicache::kernels
#endif  // HWY_ONCE
