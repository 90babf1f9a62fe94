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
#include <vector>

#include "kernels/matmul.h"
#include "util/error.h"
#include "util/grow.h"

namespace bicache::kernels {
namespace {

// Activations x: [n, k] quantized per 32 values (scale dx = absmax / 127, q = nearbyint(x * 127 /
// absmax)): q [n, k]; per 32-value block dx [n, k/32] and px = dx * sum(q) [n, k/32]; per 16-value
// sub-block dx16 (its block's scale) and px16 = dx * sum(q) [n, k/16], each superblock's 16 in
// kLane16's order (the order the kernels' horizontal sums produce).
struct QuantRows {
  size_t n = 0, k = 0;
  const int8_t* q = nullptr;
  const float* dx = nullptr;
  const float* px = nullptr;
  const float* dx16 = nullptr;
  const float* px16 = nullptr;
};

// Lane l of the two 8-lane vectors of sums of 16 holds sub-block kLane16[l] of the superblock.
constexpr int kLane16[16] = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
constexpr int kLaneOf16[16] = {0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15};

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

// Row r of x into the QuantRows buffers (the same values for every ISA: AVX2 suffices here).
void QuantizeRow(const float* x, size_t k, int8_t* q, float* dx, float* px, float* dx16,
                 float* px16) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (size_t kb = 0; kb < k / 32; ++kb) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(x + kb * 32 + 8 * i);
      m = _mm256_max_ps(m, _mm256_and_ps(v[i], abs_mask));
    }
    const float amax = MaxFloats(m);
    const size_t sb = kb / 8, j0 = 2 * (kb % 8);
    float* d16 = dx16 + sb * 16;
    float* p16 = px16 + sb * 16;
    if (amax == 0.0f) {
      std::memset(q + kb * 32, 0, 32);
      dx[kb] = px[kb] = 0.0f;
      d16[kLaneOf16[j0]] = d16[kLaneOf16[j0 + 1]] = 0.0f;
      p16[kLaneOf16[j0]] = p16[kLaneOf16[j0 + 1]] = 0.0f;
      continue;
    }
    const __m256 inv = _mm256_set1_ps(127.0f / amax);
    __m256i iv[4];
    for (int i = 0; i < 4; ++i) iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + kb * 32),
                        _mm256_permutevar8x32_epi32(packed, order));
    const int32_t s0 = SumInts(_mm256_add_epi32(iv[0], iv[1]));
    const int32_t s1 = SumInts(_mm256_add_epi32(iv[2], iv[3]));
    const float d = amax / 127.0f;
    dx[kb] = d;
    px[kb] = d * static_cast<float>(s0 + s1);
    d16[kLaneOf16[j0]] = d16[kLaneOf16[j0 + 1]] = d;
    p16[kLaneOf16[j0]] = d * static_cast<float>(s0);
    p16[kLaneOf16[j0 + 1]] = d * static_cast<float>(s1);
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
  thread_local std::vector<int8_t> qb;
  thread_local std::vector<float> fb;  // dx, px [n, in/32], dx16, px16 [n, in/16]
  int8_t* q = GrowTo(qb, n * in);
  float* f = GrowTo(fb, n * in / 32 * 2 + n * in / 16 * 2);
  float* dx = f;
  float* px = dx + n * in / 32;
  float* dx16 = px + n * in / 32;
  float* px16 = dx16 + n * in / 16;
  QuantRows xr;
  xr.n = n;
  xr.k = in;
  xr.q = q;
  xr.dx = dx;
  xr.px = px;
  xr.dx16 = dx16;
  xr.px16 = px16;
  const auto range =
      isa == IntIsa::kAvx512Vnni ? few_vnni::RangeFor(type) : few_avx2::RangeFor(type);
  const long rows = static_cast<long>(n);
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (long r = 0; r < rows; ++r) {
      const size_t i = static_cast<size_t>(r);
      few_avx2::QuantizeRow(x + i * in, in, q + i * in, dx + i * in / 32, px + i * in / 32,
                            dx16 + i * in / 16, px16 + i * in / 16);
    }
    // Contiguous ranges of output columns, one per thread: each streams its own weight rows.
    const size_t t = static_cast<size_t>(omp_get_thread_num()),
                 nt = static_cast<size_t>(omp_get_num_threads());
    const size_t o0 = out * t / nt, o1 = out * (t + 1) / nt;
    if (o1 > o0) range(w, row_bytes, o0, o1, xr, out, y);
  }
}

}  // namespace bicache::kernels
