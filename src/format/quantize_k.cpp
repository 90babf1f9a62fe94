// Block encoders for Q4_1, Q5_0, Q5_1 and the K-quants Q4_K, Q5_K, Q6_K (layouts: ggml-common.h;
// checked against ggml's dequantize_row_* and kernels::ref::DequantizeRow).
//
// Method (our own): each group of values (a 32-value block, or a 16/32-value sub-block of a
// 256-value super-block) gets a scale (and for the asymmetric types an offset) from a few
// candidate grids: for each candidate the integer levels are rounded, then the scale/offset that
// minimise the squared error for those levels are solved in closed form, and the best candidate is
// kept. K-quant sub-block scales are then quantised to 6 bits (Q4_K/Q5_K) or int8 (Q6_K) against
// an f16 super-block scale, and the levels recomputed against the values actually stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/quantize.h"

namespace bicache::format {

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  float out;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    out = std::ldexp(static_cast<float>(mant), -24);
    if (sign) out = -out;
    return out;
  }
  uint32_t bits;
  if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  }
  std::memcpy(&out, &bits, 4);
  return out;
}

namespace detail {
namespace {

void PutHalf(uint8_t* dst, float v) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(dst, &h, 2);
}
float RoundHalf(float v) {
  return HalfToFloat(FloatToHalf(v));
}

// Round half away from zero (as lround), then clamp. Inline: this is the encoders' inner loop.
inline int RoundClamp(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;  // also NaN -> lo
  if (v >= static_cast<float>(hi)) return hi;
  return std::clamp(static_cast<int>(v + (v >= 0 ? 0.5f : -0.5f)), lo, hi);
}

// x ~= a * L + b with L in [0, nmax]. With keep_offset_nonpositive, b <= 0 (the K-quants store the
// offset as a subtracted, non-negative min). Writes a >= 0 and b.
void FitAsym(const float* x, int n, int nmax, bool keep_offset_nonpositive, float* a_out,
             float* b_out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (keep_offset_nonpositive) lo = std::min(lo, 0.0f);
  if (!(hi > lo)) {  // constant (or empty-range) group
    *a_out = 0;
    *b_out = lo;
    if (keep_offset_nonpositive && *b_out > 0) *b_out = 0;
    return;
  }
  // Baseline: the plain min/max grid.
  float best_a = (hi - lo) / static_cast<float>(nmax), best_b = lo;
  auto error_of = [&](float a, float b) {
    double e = 0;
    const float ia = a > 0 ? 1.0f / a : 0.0f;
    for (int i = 0; i < n; ++i) {
      const int q = RoundClamp((x[i] - b) * ia, 0, nmax);
      const double r = a * q + b - x[i];
      e += r * r;
    }
    return e;
  };
  double best_err = error_of(best_a, best_b);
  int levels[256];
  for (int k = -4; k <= 4; ++k) {
    const float steps = static_cast<float>(nmax) + 0.25f * static_cast<float>(k);
    const float iscale = steps / (hi - lo);
    double sl = 0, sll = 0, sx = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      const int q = RoundClamp(iscale * (x[i] - lo), 0, nmax);
      levels[i] = q;
      sl += q;
      sll += static_cast<double>(q) * q;
      sx += x[i];
      sxl += static_cast<double>(x[i]) * q;
    }
    const double det = n * sll - sl * sl;
    if (det <= 0) continue;
    double a = (n * sxl - sl * sx) / det;
    double b = (sll * sx - sl * sxl) / det;
    if (keep_offset_nonpositive && b > 0) {
      b = 0;
      a = sll > 0 ? sxl / sll : 0;
    }
    if (!(a > 0)) continue;
    double e = 0;
    for (int i = 0; i < n; ++i) {
      const double r = a * levels[i] + b - x[i];
      e += r * r;
    }
    if (e < best_err) {
      best_err = e;
      best_a = static_cast<float>(a);
      best_b = static_cast<float>(b);
    }
  }
  *a_out = best_a;
  *b_out = best_b;
}

// x ~= a * L with L in [lo, hi] (lo = -hi - 1). Returns the signed scale a.
float FitSym(const float* x, int n, int lo, int hi) {
  float amax = 0, extreme = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (amax == 0) return 0;
  // Baseline: the extreme value maps to lo (the side with one more level), as ggml's Q4_0/Q5_0.
  float best_a = extreme / static_cast<float>(lo);
  double best_gain = -1;
  for (int side = 0; side < 2; ++side) {
    const float end = side == 0 ? static_cast<float>(lo) : static_cast<float>(hi);
    for (int k = -3; k <= 3; ++k) {
      const float target = end + (end < 0 ? -0.25f : 0.25f) * static_cast<float>(k);
      const float iscale = target / extreme;
      double sxl = 0, sll = 0;
      for (int i = 0; i < n; ++i) {
        const int q = RoundClamp(iscale * x[i], lo, hi);
        sxl += static_cast<double>(x[i]) * q;
        sll += static_cast<double>(q) * q;
      }
      if (sll <= 0) continue;
      // Squared error = sum x^2 - sxl^2 / sll for the optimal a = sxl / sll.
      const double gain = sxl * sxl / sll;
      if (gain > best_gain) {
        best_gain = gain;
        best_a = static_cast<float>(sxl / sll);
      }
    }
  }
  return best_a;
}

// Levels of x against stored scale/offset: L = clamp(round((x - b) / a)); a may be negative.
int Level(float x, float a, float b, int lo, int hi) {
  if (a == 0) return std::clamp(0, lo, hi);
  return RoundClamp((x - b) / a, lo, hi);
}

// The 12-byte packing of eight 6-bit scales and mins (inverse of ggml's get_scale_min_k4).
void PackScalesK4(const int* sc, const int* m, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | ((m[j + 4] & 0x0F) << 4));
  }
}

// Shared by Q4_K and Q5_K: levels 0..nmax per 32-value sub-block, value = d*sc*L - dmin*m.
// Writes d, dmin and the 12 scale bytes at out[0..16) and the 256 levels to L.
void EncodeKAsym(const float* x, int nmax, uint8_t* out, uint8_t* L) {
  float scale[8], mn[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float a, b;
    FitAsym(x + 32 * j, 32, nmax, /*keep_offset_nonpositive=*/true, &a, &b);
    scale[j] = a;
    mn[j] = -b;
    max_scale = std::max(max_scale, a);
    max_min = std::max(max_min, -b);
  }
  const float d = RoundHalf(max_scale / 63.0f), dmin = RoundHalf(max_min / 63.0f);
  PutHalf(out, max_scale / 63.0f);
  PutHalf(out + 2, max_min / 63.0f);
  int sc[8], m[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0 ? RoundClamp(scale[j] / d, 0, 63) : 0;
    m[j] = dmin > 0 ? RoundClamp(mn[j] / dmin, 0, 63) : 0;
  }
  PackScalesK4(sc, m, out + 4);
  for (int j = 0; j < 8; ++j) {
    // Same float expressions as the decoder: value = (d*sc) * L - (dmin*m).
    const float a = d * static_cast<float>(sc[j]), b = -(dmin * static_cast<float>(m[j]));
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(Level(x[32 * j + i], a, b, 0, nmax));
  }
}

}  // namespace

// Q4_1: f16 d, f16 m, 16 B nibbles (element j low nibble of byte j, j + 16 high); x = d*q + m.
void EncodeQ4_1Block(const float* x, uint8_t* out) {
  float a, b;
  FitAsym(x, 32, 15, false, &a, &b);
  PutHalf(out, a);
  PutHalf(out + 2, b);
  const float d = RoundHalf(a), m = RoundHalf(b);
  for (int j = 0; j < 16; ++j) {
    const int q0 = Level(x[j], d, m, 0, 15), q1 = Level(x[j + 16], d, m, 0, 15);
    out[4 + j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

// Q5_0: f16 d, u32 qh (bit j = 5th bit of element j), 16 B low nibbles; x = d*(q - 16).
void EncodeQ5_0Block(const float* x, uint8_t* out) {
  const float a = FitSym(x, 32, -16, 15);
  PutHalf(out, a);
  const float d = RoundHalf(a);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = Level(x[j], d, 0, -16, 15) + 16, q1 = Level(x[j + 16], d, 0, -16, 15) + 16;
    out[6 + j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
  }
  std::memcpy(out + 2, &qh, 4);
}

// Q5_1: f16 d, f16 m, u32 qh, 16 B low nibbles; x = d*q + m.
void EncodeQ5_1Block(const float* x, uint8_t* out) {
  float a, b;
  FitAsym(x, 32, 31, false, &a, &b);
  PutHalf(out, a);
  PutHalf(out + 2, b);
  const float d = RoundHalf(a), m = RoundHalf(b);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const int q0 = Level(x[j], d, m, 0, 31), q1 = Level(x[j + 16], d, m, 0, 31);
    out[8 + j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>(q0 >> 4) << j;
    qh |= static_cast<uint32_t>(q1 >> 4) << (j + 16);
  }
  std::memcpy(out + 4, &qh, 4);
}

// Q4_K (144 B): f16 d | f16 dmin | 12 B scales/mins | 128 B qs. Sub-blocks 2p and 2p+1 share the
// 32 bytes qs[32p..32p+32): element 64p + l in the low nibble of byte l, 64p + 32 + l in the high.
void EncodeQ4_KBlock(const float* x, uint8_t* out) {
  uint8_t L[256];
  EncodeKAsym(x, 15, out, L);
  uint8_t* qs = out + 16;
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
    }
  }
}

// Q5_K (176 B): f16 d | f16 dmin | 12 B scales/mins | 32 B qh | 128 B qs. Low nibbles as Q4_K;
// bit 2p of qh[l] is the 5th bit of element 64p + l, bit 2p+1 that of element 64p + 32 + l.
void EncodeQ5_KBlock(const float* x, uint8_t* out) {
  uint8_t L[256];
  EncodeKAsym(x, 31, out, L);
  uint8_t* qh = out + 16;
  uint8_t* qs = out + 48;
  std::memset(qh, 0, 32);
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * p + l], hi = L[64 * p + 32 + l];
      qs[32 * p + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
    }
  }
}

// Q6_K (210 B): 128 B ql | 64 B qh | 16 int8 scales | f16 d. x = d * sc[k] * (L - 32) for the
// 16-value sub-block k. Per 128-value half h (ql + 64h, qh + 32h, sc + 8h), for l in 0..31:
// ql[l] = L[l] low | L[l+64] low << 4, ql[l+32] = L[l+32] low | L[l+96] low << 4,
// qh[l] = L[l]>>4 | L[l+32]>>4 << 2 | L[l+64]>>4 << 4 | L[l+96]>>4 << 6.
void EncodeQ6_KBlock(const float* x, uint8_t* out) {
  float scale[16];
  float amax = 0;
  for (int k = 0; k < 16; ++k) {
    scale[k] = FitSym(x + 16 * k, 16, -32, 31);
    amax = std::max(amax, std::fabs(scale[k]));
  }
  const float d = RoundHalf(amax / 127.0f);
  PutHalf(out + 208, amax / 127.0f);
  int8_t sc[16];
  for (int k = 0; k < 16; ++k)
    sc[k] = static_cast<int8_t>(d > 0 ? RoundClamp(scale[k] / d, -128, 127) : 0);
  std::memcpy(out + 192, sc, 16);
  uint8_t L[256];
  for (int k = 0; k < 16; ++k) {
    const float a = d * static_cast<float>(sc[k]);
    for (int i = 0; i < 16; ++i)
      L[16 * k + i] = static_cast<uint8_t>(Level(x[16 * k + i], a, 0, -32, 31) + 32);
  }
  uint8_t* ql = out;
  uint8_t* qh = out + 128;
  for (int h = 0; h < 2; ++h) {
    const uint8_t* Lh = L + 128 * h;
    uint8_t* qlh = ql + 64 * h;
    uint8_t* qhh = qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      qlh[l] = static_cast<uint8_t>((Lh[l] & 0x0F) | ((Lh[l + 64] & 0x0F) << 4));
      qlh[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0x0F) | ((Lh[l + 96] & 0x0F) << 4));
      qhh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                    ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
    }
  }
}

}  // namespace detail
}  // namespace bicache::format
