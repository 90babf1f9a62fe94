// Int8ForwardQ8_0: AVX512-VNNI kernels compiled with target attributes and chosen at run time (the
// rest of the binary stays baseline x86-64; Highway 1.0 has no wrapper for vpdpbusd).
//
// Layout. A panel is 32 weight rows (32 output columns of y). Per 32-k block kb it is packed as
// 8 groups g of [32 columns][4 bytes]: byte (kb, g, c, j) = q[c][32 kb + 4 g + j] + 128 (u8), so
// one zmm load holds 16 columns x 4 consecutive k, what vpdpbusd multiplies with 4 bytes of one
// activation row broadcast to every lane. Packing gathers those dwords straight from the mapped
// Q8_0 rows (0.06 ns per weight), so nothing is kept beside the file.
// Arithmetic per block: sum_k (q_w + 128) q_x - 128 sum_k q_x = sum_k q_w q_x, exact in int32
// (|.| <= 32 * 255 * 127); then y += (float) dot * (d_w * d_x) in float.
#include "kernels/int8_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/few_rows.h"
#include "kernels/matmul.h"
#include "util/error.h"
#include "util/grow.h"

namespace bicache::kernels {
namespace {

constexpr size_t kPanelCols = 32;
constexpr size_t kTileRows = 4;
constexpr size_t kQ8Bytes = 34;  // f16 d + 32 int8

#define BICACHE_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))

bool CpuHasVnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}

// Packs rows [c0, c0 + cols) of W (cols <= 32; missing columns repeat the panel's first row and
// their outputs are dropped) into u: [k/32][8][32][4] and a: [k/32][32] (the f16 scales as float).
BICACHE_VNNI void PackPanel(const uint8_t* w, size_t row_bytes, size_t cols, size_t k, uint8_t* u,
                            float* a) {
  alignas(64) int32_t off[kPanelCols];
  for (size_t c = 0; c < kPanelCols; ++c)
    off[c] = static_cast<int32_t>((c < cols ? c : 0) * row_bytes);
  const __m512i off0 = _mm512_load_si512(off), off1 = _mm512_load_si512(off + 16);
  const __m512i flip = _mm512_set1_epi32(static_cast<int32_t>(0x80808080u));
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  for (size_t kb = 0; kb < k / 32; ++kb) {
    const uint8_t* blk = w + kb * kQ8Bytes;
    for (int g = 0; g < 8; ++g) {
      const uint8_t* src = blk + 2 + 4 * g;
      uint8_t* dst = u + (kb * 8 + g) * 128;
      _mm512_storeu_si512(dst, _mm512_xor_si512(_mm512_i32gather_epi32(off0, src, 1), flip));
      _mm512_storeu_si512(dst + 64, _mm512_xor_si512(_mm512_i32gather_epi32(off1, src, 1), flip));
    }
    // The scale's two bytes (plus the block's first two quants, masked off) for each column.
    const __m512i h0 = _mm512_and_si512(_mm512_i32gather_epi32(off0, blk, 1), low16);
    const __m512i h1 = _mm512_and_si512(_mm512_i32gather_epi32(off1, blk, 1), low16);
    _mm512_storeu_ps(a + kb * 32, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h0)));
    _mm512_storeu_ps(a + kb * 32 + 16, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h1)));
  }
}

// out[4][32] = rows [r0, r0 + 4) of the quantized activations times the packed panel.
BICACHE_VNNI void Tile4x32(const int8_t* xq, const float* dx, const int32_t* sx, size_t k,
                           const uint8_t* u, const float* a, float* out) {
  const size_t kbs = k / 32;
  __m512 acc[kTileRows][2];
#pragma GCC unroll 4
  for (size_t r = 0; r < kTileRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (size_t kb = 0; kb < kbs; ++kb) {
    __m512i dot[kTileRows][2];
#pragma GCC unroll 4
    for (size_t r = 0; r < kTileRows; ++r) dot[r][0] = dot[r][1] = _mm512_setzero_si512();
    const uint8_t* uk = u + kb * 8 * 128;
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i w0 = _mm512_loadu_si512(uk + g * 128),
                    w1 = _mm512_loadu_si512(uk + g * 128 + 64);
#pragma GCC unroll 4
      for (size_t r = 0; r < kTileRows; ++r) {
        int32_t four;
        std::memcpy(&four, xq + r * k + kb * 32 + 4 * g, 4);
        const __m512i xb = _mm512_set1_epi32(four);
        dot[r][0] = _mm512_dpbusd_epi32(dot[r][0], w0, xb);
        dot[r][1] = _mm512_dpbusd_epi32(dot[r][1], w1, xb);
      }
    }
    const __m512 a0 = _mm512_loadu_ps(a + kb * 32), a1 = _mm512_loadu_ps(a + kb * 32 + 16);
#pragma GCC unroll 4
    for (size_t r = 0; r < kTileRows; ++r) {
      const __m512i corr = _mm512_set1_epi32(128 * sx[r * kbs + kb]);
      const __m512 d = _mm512_set1_ps(dx[r * kbs + kb]);
      acc[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[r][0], corr)),
                                  _mm512_mul_ps(a0, d), acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(dot[r][1], corr)),
                                  _mm512_mul_ps(a1, d), acc[r][1]);
    }
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < kTileRows; ++r) {
    _mm512_storeu_ps(out + r * kPanelCols, acc[r][0]);
    _mm512_storeu_ps(out + r * kPanelCols + 16, acc[r][1]);
  }
}

BICACHE_VNNI void QuantizeRowsVnni(const float* x, size_t n, size_t k, int8_t* q, float* d,
                                   int32_t* s) {
  const size_t kbs = k / 32;
  for (size_t r = 0; r < n; ++r) {
    for (size_t kb = 0; kb < kbs; ++kb) {
      const float* xb = x + r * k + kb * 32;
      const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
      const size_t i = r * kbs + kb;
      int8_t* qb = q + r * k + kb * 32;
      if (amax == 0.0f) {
        std::memset(qb, 0, 32);
        d[i] = 0.0f;
        s[i] = 0;
        continue;
      }
      const __m512 inv = _mm512_set1_ps(127.0f / amax);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, inv)),
                    q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, inv));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtsepi32_epi8(q1));
      d[i] = amax / 127.0f;
      s[i] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
  }
}

}  // namespace

bool Int8RouteAvailable() {
  static const bool on = ActiveIntIsa() == IntIsa::kAvx512Vnni && CpuHasVnni() &&
                         ActiveMatmulPrecision() == MatmulPrecision::kBf16;
  return on;
}

void QuantizeActivationsQ8(const float* x, size_t n, size_t k, int8_t* q, float* d, int32_t* s) {
  if (k % 32 != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "int8 activations: row length " + std::to_string(k) + " is not a multiple of 32");
  }
  if (!CpuHasVnni())
    throw Error(ErrorKind::kUnsupported, "int8 activations: this CPU has no AVX512-VNNI");
  QuantizeRowsVnni(x, n, k, q, d, s);
}

void Int8ForwardQ8_0(const float* x, size_t n, size_t in, const uint8_t* w, size_t row_bytes,
                     size_t out, float* y) {
  if (!Int8RouteAvailable())
    throw Error(ErrorKind::kUnsupported, "int8 route: not available on this CPU");
  if (n == 0) return;
  if (in % 32 != 0 || row_bytes != in / 32 * kQ8Bytes) {
    throw Error(ErrorKind::kInvalidArgument, "int8 route: Q8_0 rows of " + std::to_string(in) +
                                                 " values must be " +
                                                 std::to_string(in / 32 * kQ8Bytes) + " bytes");
  }
  const size_t kbs = in / 32;
  const size_t rows = (n + kTileRows - 1) / kTileRows * kTileRows;  // padded with zero rows
  // Activations, quantized once for every panel: q [rows, in], d and s [rows, in / 32].
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  thread_local std::vector<int32_t> s;
  int8_t* qx = GrowTo(q, rows * in);
  float* dx = GrowTo(d, rows * kbs);
  int32_t* sx = GrowTo(s, rows * kbs);
  const long n_rows = static_cast<long>(n);
#pragma omp parallel for schedule(static)
  for (long r = 0; r < n_rows; ++r)
    QuantizeRowsVnni(x + r * in, 1, in, qx + r * in, dx + r * kbs, sx + r * kbs);
  std::memset(qx + n * in, 0, (rows - n) * in);
  std::fill(dx + n * kbs, dx + rows * kbs, 0.0f);
  std::fill(sx + n * kbs, sx + rows * kbs, 0);

  const long n_panels = static_cast<long>((out + kPanelCols - 1) / kPanelCols);
#pragma omp parallel
  {
    thread_local std::vector<uint8_t> ub;  // [in / 32][8][32][4]
    thread_local std::vector<float> ab;    // [in / 32][32]
    uint8_t* u = GrowTo(ub, kbs * 8 * 128);
    float* a = GrowTo(ab, kbs * kPanelCols);
    alignas(64) float tile[kTileRows * kPanelCols];
#pragma omp for schedule(dynamic, 1)
    for (long p = 0; p < n_panels; ++p) {
      const size_t c0 = static_cast<size_t>(p) * kPanelCols, cols = std::min(kPanelCols, out - c0);
      PackPanel(w + c0 * row_bytes, row_bytes, cols, in, u, a);
      for (size_t r0 = 0; r0 < rows; r0 += kTileRows) {
        Tile4x32(qx + r0 * in, dx + r0 * kbs, sx + r0 * kbs, in, u, a, tile);
        const size_t valid = std::min(kTileRows, n - std::min(n, r0));
        for (size_t r = 0; r < valid; ++r)
          std::memcpy(y + (r0 + r) * out + c0, tile + r * kPanelCols, cols * sizeof(float));
      }
    }
  }
}

}  // namespace bicache::kernels
