// FewRowsBf16Forward (few_rows.h): bf16 weights at a few rows. Each thread owns a contiguous range
// of output columns; each weight row is read once per group of up to 8 activation rows (8 KiB at in
// = 4096: the next group finds it in L1) and every 32 (AVX-512) or 8 (AVX2) weights loaded feed one
// multiply-add per row. AVX512-BF16: vdpbf16ps on the bf16 activations (pairs of products exact in
// float, summed in float); AVX2: the weights widened to float, FMAs with the activations already
// rounded to bf16 and widened (the f32 path's operands). Compiled with target attributes and chosen
// by cpuid, as few_rows.cpp does.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <string>

#include "kernels/few_rows.h"
#include "util/error.h"

namespace bicache::kernels {
namespace {

constexpr size_t kGroup = 8;  // activation rows per pass over a weight row

#define BICACHE_BF16_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define BICACHE_BF16_AVX2 __attribute__((target("avx2,fma")))

// y[r, o] for rows [0, R) of x (bf16, row stride `in`) and weight row wr; in a multiple of 32.
template <size_t R>
BICACHE_BF16_AVX512 void DotsAvx512(const uint16_t* wr, const uint16_t* x, size_t in, float* y,
                                    size_t out) {
  __m512 acc[R];
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (size_t k = 0; k < in; k += 32) {
    const __m512bh w = (__m512bh)_mm512_loadu_si512(wr + k);
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) {
      acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)_mm512_loadu_si512(x + r * in + k), w);
    }
  }
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r) {  // (not _mm512_reduce_add_ps: GCC 12 warns inside it)
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[r]);
    float sum = 0.0f;
    for (float v : lanes) sum += v;
    y[r * out] = sum;
  }
}

// The same with x float (the bf16 values widened), in a multiple of 8.
template <size_t R>
BICACHE_BF16_AVX2 void DotsAvx2(const uint16_t* wr, const float* x, size_t in, float* y,
                                size_t out) {
  __m256 acc[R];
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (size_t k = 0; k < in; k += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + k));
    const __m256 w = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(x + r * in + k), w, acc[r]);
  }
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
    y[r * out] = _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  }
}

template <class T, template <size_t> class Dots>
struct Group {
  // Rows [0, n) of x (n <= kGroup) against weight row wr into y's column (y + o).
  static void Run(const uint16_t* wr, const T* x, size_t n, size_t in, float* y, size_t out) {
    switch (n) {
      case 1:
        return Dots<1>::Run(wr, x, in, y, out);
      case 2:
        return Dots<2>::Run(wr, x, in, y, out);
      case 3:
        return Dots<3>::Run(wr, x, in, y, out);
      case 4:
        return Dots<4>::Run(wr, x, in, y, out);
      case 5:
        return Dots<5>::Run(wr, x, in, y, out);
      case 6:
        return Dots<6>::Run(wr, x, in, y, out);
      case 7:
        return Dots<7>::Run(wr, x, in, y, out);
      default:
        return Dots<8>::Run(wr, x, in, y, out);
    }
  }
};

template <size_t R>
struct Avx512Dots {
  static void Run(const uint16_t* wr, const uint16_t* x, size_t in, float* y, size_t out) {
    DotsAvx512<R>(wr, x, in, y, out);
  }
};
template <size_t R>
struct Avx2Dots {
  static void Run(const uint16_t* wr, const float* x, size_t in, float* y, size_t out) {
    DotsAvx2<R>(wr, x, in, y, out);
  }
};

bool CpuHasAvx512Bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512bf16");
}

}  // namespace

bool FewRowsBf16Available(IntIsa isa) {
  static const bool bf16 = CpuHasAvx512Bf16();
  return isa == IntIsa::kAvx2 || (isa == IntIsa::kAvx512Vnni && bf16);
}

void FewRowsBf16Forward(IntIsa isa, const uint16_t* xb, const float* xf, size_t n, size_t in,
                        const uint16_t* w, size_t out, float* y) {
  const bool wide = isa == IntIsa::kAvx512Vnni;
  if (isa == IntIsa::kNone || isa > CpuIntIsa() || !FewRowsBf16Available(isa)) {
    throw Error(ErrorKind::kUnsupported,
                std::string("few-row bf16 route: no ") + IntIsaName(isa) + " kernel on this CPU");
  }
  if (in % (wide ? 32 : 8) != 0 || (wide ? xb : reinterpret_cast<const void*>(xf)) == nullptr) {
    throw Error(ErrorKind::kInvalidArgument, "few-row bf16 route: rows of " + std::to_string(in) +
                                                 " values are not whole " + (wide ? "32" : "8") +
                                                 "-value vectors, or the activations are missing");
  }
  if (n == 0 || out == 0) return;
#pragma omp parallel
  {
    const size_t t = static_cast<size_t>(omp_get_thread_num()),
                 nt = static_cast<size_t>(omp_get_num_threads());
    const size_t o0 = out * t / nt, o1 = out * (t + 1) / nt;
    for (size_t o = o0; o < o1; ++o) {
      for (size_t r0 = 0; r0 < n; r0 += kGroup) {
        const size_t rows = std::min(kGroup, n - r0);
        if (wide) {
          Group<uint16_t, Avx512Dots>::Run(w + o * in, xb + r0 * in, rows, in, y + r0 * out + o,
                                           out);
        } else {
          Group<float, Avx2Dots>::Run(w + o * in, xf + r0 * in, rows, in, y + r0 * out + o, out);
        }
      }
    }
  }
}

}  // namespace bicache::kernels
