// FewRowsForward (few_rows.h): activations quantized once per product, then each thread's range
// of output columns through the kernels of the chosen instruction set. The kernels
// (few_rows-inl.h) are compiled twice below under `#pragma GCC target` (clang: `#pragma clang
// attribute`): AVX2 and AVX512-VNNI; the rest of the binary stays baseline x86-64 and the CPU is
// asked at run time (cpuid), as int8_gemm.cpp does for the Q8_0 tile.
#include "kernels/few_rows.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/matmul.h"
#include "util/error.h"
#include "util/grow.h"

namespace bicache::kernels {
namespace {

// Activations x: [n, k] quantized to int8 q [n, k] (scale dx = absmax / 127, q = nearbyint(x *
// 127 / absmax)), per 32 values for the 32-value block types and IQ4_XS, per 256 for the
// K-quants (FewRowsPer256). Per 32: dx [n, k/32] and px = dx * sum(q) [n, k/32]. Per 256: dx
// [n, k/256], px = dx * sum(q) per 32 values [n, k/32] and px16 the same per 16 [n, k/16].
struct QuantRows {
  size_t n = 0, k = 0;
  const int8_t* q = nullptr;
  const float* dx = nullptr;
  const float* px = nullptr;
  const float* px16 = nullptr;
};

}  // namespace

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace few_avx2 {
inline float QuantF16ToF32(uint16_t h) {
  return _cvtsh_ss(h);
}
#include "kernels/quant_blocks-inl.h"
inline float Half(const uint8_t* p) {
  return HalfAt(p);
}
#define BICACHE_FEW_ROWS_VNNI 0
#include "kernels/few_rows-inl.h"
#undef BICACHE_FEW_ROWS_VNNI

inline int32_t SumInts(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1)));
}

inline float MaxFloats(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

// 32 values of x (absmax amax > 0) -> q[0, 32) with scale amax / 127; *s0, *s1: the sums of
// q[0, 16) and q[16, 32).
inline void Quantize32(const float* x, float amax, int8_t* q, int32_t* s0, int32_t* s1) {
  const __m256 inv = _mm256_set1_ps(127.0f / amax);
  __m256i iv[4];
  for (int i = 0; i < 4; ++i)
    iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), inv));
  const __m256i packed =
      _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
  _mm256_storeu_si256(
      reinterpret_cast<__m256i*>(q),
      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  *s0 = SumInts(_mm256_add_epi32(iv[0], iv[1]));
  *s1 = SumInts(_mm256_add_epi32(iv[2], iv[3]));
}

inline float AbsMax(const float* x, size_t len) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (size_t i = 0; i < len; i += 8)
    m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  return MaxFloats(m);
}

// Row r of x into the QuantRows buffers, per 32 (the same values for every ISA: AVX2 suffices).
void QuantizeRow32(const float* x, size_t k, int8_t* q, float* dx, float* px) {
  for (size_t kb = 0; kb < k / 32; ++kb) {
    const float amax = AbsMax(x + kb * 32, 32);
    if (amax == 0.0f) {
      std::memset(q + kb * 32, 0, 32);
      dx[kb] = px[kb] = 0.0f;
      continue;
    }
    int32_t s0, s1;
    Quantize32(x + kb * 32, amax, q + kb * 32, &s0, &s1);
    dx[kb] = amax / 127.0f;
    px[kb] = dx[kb] * static_cast<float>(s0 + s1);
  }
}

// The same per 256 (K-quants).
void QuantizeRow256(const float* x, size_t k, int8_t* q, float* dx, float* px, float* px16) {
  for (size_t sb = 0; sb < k / 256; ++sb) {
    const float amax = AbsMax(x + sb * 256, 256);
    const float d = amax / 127.0f;
    dx[sb] = d;
    for (size_t kb = 8 * sb; kb < 8 * sb + 8; ++kb) {
      int32_t s0 = 0, s1 = 0;
      if (amax == 0.0f) {
        std::memset(q + kb * 32, 0, 32);
      } else {
        Quantize32(x + kb * 32, amax, q + kb * 32, &s0, &s1);
      }
      px[kb] = d * static_cast<float>(s0 + s1);
      px16[2 * kb] = d * static_cast<float>(s0);
      px16[2 * kb + 1] = d * static_cast<float>(s1);
    }
  }
}
}  // namespace few_avx2
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#if defined(__clang__)
#pragma clang attribute push(                                                      \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif
namespace few_vnni {
inline float QuantF16ToF32(uint16_t h) {
  return _cvtsh_ss(h);
}
#include "kernels/quant_blocks-inl.h"
inline float Half(const uint8_t* p) {
  return HalfAt(p);
}
#define BICACHE_FEW_ROWS_VNNI 1
#include "kernels/few_rows-inl.h"
#undef BICACHE_FEW_ROWS_VNNI
}  // namespace few_vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace {

IntIsa ProbeCpu() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return IntIsa::kNone;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
    return IntIsa::kAvx512Vnni;
  }
  return IntIsa::kAvx2;
}

IntIsa DecideIsa() {
  const char* env = std::getenv("BICACHE_INT8");
  const auto cap = ParseIntIsaOverride(env == nullptr ? "" : env);
  IntIsa isa = CpuIntIsa();
  if (cap) isa = std::min(isa, *cap);
  if (ActiveMatmulPrecision() == MatmulPrecision::kF32) isa = std::min(isa, IntIsa::kAvx2);
  return isa;
}

}  // namespace

const char* IntIsaName(IntIsa isa) {
  switch (isa) {
    case IntIsa::kAvx2:
      return "avx2";
    case IntIsa::kAvx512Vnni:
      return "avx512vnni";
    default:
      return "none";
  }
}

IntIsa CpuIntIsa() {
  static const IntIsa isa = ProbeCpu();
  return isa;
}

std::optional<IntIsa> ParseIntIsaOverride(std::string_view value) {
  if (value.empty() || value == "auto") return std::nullopt;
  if (value == "0" || value == "off") return IntIsa::kNone;
  if (value == "avx2") return IntIsa::kAvx2;
  throw Error(ErrorKind::kInvalidArgument,
              "BICACHE_INT8 must be auto, 0 (off) or avx2, got '" + std::string(value) + "'");
}

IntIsa ActiveIntIsa() {
  static const IntIsa isa = DecideIsa();
  return isa;
}

bool FewRowsPer256(format::TensorType type) {
  using TT = format::TensorType;
  return type == TT::Q2_K || type == TT::Q3_K || type == TT::Q4_K || type == TT::Q5_K ||
         type == TT::Q6_K;
}

bool FewRowsSupports(format::TensorType type, size_t in) {
  return in % 256 == 0 && in > 0 && few_avx2::RangeFor(type) != nullptr;
}

void FewRowsForward(IntIsa isa, format::TensorType type, const float* x, size_t n, size_t in,
                    const uint8_t* w, size_t row_bytes, size_t out, float* y) {
  if (isa == IntIsa::kNone || isa > CpuIntIsa()) {
    throw Error(ErrorKind::kUnsupported, std::string("few-row route: this CPU has no ") +
                                             IntIsaName(isa) + " (it has " +
                                             IntIsaName(CpuIntIsa()) + ")");
  }
  if (!FewRowsSupports(type, in)) {
    throw Error(ErrorKind::kUnsupported, "few-row route: no kernel for " +
                                             format::TensorTypeName(type) + " rows of " +
                                             std::to_string(in) + " values");
  }
  uint64_t block_elems = 0, block_bytes = 0;
  format::TensorTypeLayout(type, &block_elems, &block_bytes);
  if (row_bytes != in / block_elems * block_bytes || n > kFewRowsMax) {
    throw Error(ErrorKind::kInvalidArgument,
                "few-row route: " + std::to_string(n) + " rows (at most " +
                    std::to_string(kFewRowsMax) + ") of " + format::TensorTypeName(type) +
                    " weights with rows of " + std::to_string(row_bytes) + " bytes for " +
                    std::to_string(in) + " values");
  }
  if (n == 0 || out == 0) return;
  const bool per256 = FewRowsPer256(type);
  thread_local std::vector<int8_t> qb;
  thread_local std::vector<float> fb;  // dx [n, in/32 or in/256], px [n, in/32], px16 [n, in/16]
  int8_t* q = GrowTo(qb, n * in);
  float* f = GrowTo(fb, n * in / 32 * 2 + n * in / 16);
  float* dx = f;
  float* px = dx + n * in / 32;
  float* px16 = px + n * in / 32;
  const size_t dx_row = per256 ? in / 256 : in / 32;
  QuantRows xr;
  xr.n = n;
  xr.k = in;
  xr.q = q;
  xr.dx = dx;
  xr.px = px;
  xr.px16 = px16;
  const auto range =
      isa == IntIsa::kAvx512Vnni ? few_vnni::RangeFor(type) : few_avx2::RangeFor(type);
  const long rows = static_cast<long>(n);
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (long r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(r);
      if (per256) {
        few_avx2::QuantizeRow256(x + i * in, in, q + i * in, dx + i * dx_row, px + i * in / 32,
                                 px16 + i * in / 16);
      } else {
        few_avx2::QuantizeRow32(x + i * in, in, q + i * in, dx + i * dx_row, px + i * in / 32);
      }
    }
    // Contiguous ranges of output columns, one per thread: each streams its own weight rows.
    const size_t t = static_cast<size_t>(omp_get_thread_num()),
                 nt = static_cast<size_t>(omp_get_num_threads());
    const size_t o0 = out * t / nt, o1 = out * (t + 1) / nt;
    if (o1 > o0) range(w, row_bytes, o0, o1, xr, out, y);
  }
}

}  // namespace bicache::kernels
