// KQuantTileForward (kquant_tile.h): activations quantized once per product (AVX2 code, the same
// values for both ISAs), then panels of output columns through the kernels of the chosen ISA.
// The kernels (kquant_tile-inl.h) are compiled twice under `#pragma GCC target` (clang: `#pragma
// clang attribute`), AVX2 and AVX512-VNNI, as few_rows.cpp does; the CPU is asked at run time.
#include "kernels/kquant_tile.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "util/error.h"
#include "util/grow.h"

namespace bicache::kernels {
namespace {

// Activations quantized per 256 values: q [n, k] int8 (nearbyint(x * 127 / absmax)), dx [n, k/256]
// (absmax / 127), spair [n, k / sub / 2]: the sums of q over sub-blocks 2i and 2i + 1 of `sub`
// values as the low and high int16 of one int32 (|sum| <= 32 x 127). n is padded to an even
// count with a zero row.
struct KActs {
  size_t n = 0, k = 0;
  const int8_t* q = nullptr;
  const float* dx = nullptr;
  const int32_t* spair = nullptr;
};

constexpr size_t kRowPad = 2;  // the tiles' row counts are even (kquant_tile-inl.h)

}  // namespace

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
namespace ktile_avx2 {
inline float QuantF16ToF32(uint16_t h) {
  return _cvtsh_ss(h);
}
#include "kernels/quant_blocks-inl.h"
inline float Half(const uint8_t* p) {
  return HalfAt(p);
}
#define BICACHE_KTILE_VNNI 0
#include "kernels/kquant_tile-inl.h"
#undef BICACHE_KTILE_VNNI

inline int32_t SumInts(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1)));
}

inline float AbsMax256(const float* x) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < 256; i += 8)
    m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

// One superblock of 256 values: q[256], *dx, and s16[16] the sums of q per 16 values.
void QuantizeSuper(const float* x, int8_t* q, float* dx, int32_t* s16) {
  const float amax = AbsMax256(x);
  if (amax == 0.0f) {
    std::memset(q, 0, 256);
    std::fill(s16, s16 + 16, 0);
    *dx = 0.0f;
    return;
  }
  *dx = amax / 127.0f;
  const __m256 inv = _mm256_set1_ps(127.0f / amax);
  for (int c = 0; c < 8; ++c) {
    __m256i iv[4];
    for (int i = 0; i < 4; ++i)
      iv[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * i), inv));
    const __m256i packed =
        _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(q + 32 * c),
        _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    s16[2 * c] = SumInts(_mm256_add_epi32(iv[0], iv[1]));
    s16[2 * c + 1] = SumInts(_mm256_add_epi32(iv[2], iv[3]));
  }
}

inline int32_t Pair(int32_t lo, int32_t hi) {
  return static_cast<int32_t>((static_cast<uint32_t>(lo) & 0xFFFFu) |
                              (static_cast<uint32_t>(hi) << 16));
}

// Row x[k] into q[k], dx[k / 256] and spair[k / sub / 2].
void QuantizeRow(const float* x, size_t k, int sub, int8_t* q, float* dx, int32_t* spair) {
  for (size_t sb = 0; sb < k / 256; ++sb) {
    int32_t s16[16];
    QuantizeSuper(x + sb * 256, q + sb * 256, dx + sb, s16);
    if (sub == 16) {
      for (int i = 0; i < 8; ++i) spair[sb * 8 + i] = Pair(s16[2 * i], s16[2 * i + 1]);
    } else {
      for (int i = 0; i < 4; ++i) {
        spair[sb * 4 + i] = Pair(s16[4 * i] + s16[4 * i + 1], s16[4 * i + 2] + s16[4 * i + 3]);
      }
    }
  }
}
}  // namespace ktile_avx2
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
namespace ktile_vnni {
inline float QuantF16ToF32(uint16_t h) {
  return _cvtsh_ss(h);
}
#include "kernels/quant_blocks-inl.h"
inline float Half(const uint8_t* p) {
  return HalfAt(p);
}
#define BICACHE_KTILE_VNNI 1
#include "kernels/kquant_tile-inl.h"
#undef BICACHE_KTILE_VNNI
}  // namespace ktile_vnni
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

bool KQuantTileSupports(format::TensorType type, size_t in) {
  int sub = 0;
  return in > 0 && in % 256 == 0 && ktile_avx2::ProductFor(type, &sub) != nullptr;
}

void KQuantTileForward(IntIsa isa, format::TensorType type, const float* x, size_t n, size_t in,
                       const uint8_t* w, size_t row_bytes, size_t out, float* y) {
  if (isa == IntIsa::kNone || isa > CpuIntIsa()) {
    throw Error(ErrorKind::kUnsupported, std::string("K-quant tile route: this CPU has no ") +
                                             IntIsaName(isa) + " (it has " +
                                             IntIsaName(CpuIntIsa()) + ")");
  }
  if (!KQuantTileSupports(type, in)) {
    throw Error(ErrorKind::kUnsupported, "K-quant tile route: no kernel for " +
                                             format::TensorTypeName(type) + " rows of " +
                                             std::to_string(in) + " values");
  }
  uint64_t block_elems = 0, block_bytes = 0;
  format::TensorTypeLayout(type, &block_elems, &block_bytes);
  if (row_bytes != in / block_elems * block_bytes) {
    throw Error(ErrorKind::kInvalidArgument, "K-quant tile route: " + format::TensorTypeName(type) +
                                                 " rows of " + std::to_string(in) + " values are " +
                                                 std::to_string(in / block_elems * block_bytes) +
                                                 " bytes, not " + std::to_string(row_bytes));
  }
  if (n == 0 || out == 0) return;
  int sub = 0;
  const auto product = isa == IntIsa::kAvx512Vnni ? ktile_vnni::ProductFor(type, &sub)
                                                  : ktile_avx2::ProductFor(type, &sub);
  const size_t rows = (n + kRowPad - 1) / kRowPad * kRowPad;
  const size_t n_super = in / 256, n_pairs = in / static_cast<size_t>(sub) / 2;
  thread_local std::vector<int8_t> qb;
  thread_local std::vector<float> db;
  thread_local std::vector<int32_t> sb;
  KActs a;
  a.n = rows;
  a.k = in;
  int8_t* q = GrowTo(qb, rows * in);
  float* dx = GrowTo(db, rows * n_super);
  int32_t* sp = GrowTo(sb, rows * n_pairs);
  a.q = q;
  a.dx = dx;
  a.spair = sp;
  const long n_rows = static_cast<long>(n);
#pragma omp parallel for schedule(static)
  for (long r = 0; r < n_rows; ++r) {
    const size_t i = static_cast<size_t>(r);
    ktile_avx2::QuantizeRow(x + i * in, in, sub, q + i * in, dx + i * n_super, sp + i * n_pairs);
  }
  std::memset(q + n * in, 0, (rows - n) * in);
  std::fill(dx + n * n_super, dx + rows * n_super, 0.0f);
  std::fill(sp + n * n_pairs, sp + rows * n_pairs, 0);
  product(a, n, w, row_bytes, out, y);
}

}  // namespace bicache::kernels
