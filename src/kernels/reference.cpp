// Scalar reference kernels (see reference.h). Deliberately simple: one obvious loop per formula.
#include "kernels/reference.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/few_rows.h"
#include "util/error.h"

namespace bicache::kernels::ref {

uint16_t Bf16FromF32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x0040);  // keep sign, quiet
  const uint32_t lsb = (bits >> 16) & 1u;
  return static_cast<uint16_t>((bits + 0x7FFFu + lsb) >> 16);
}

float F32FromBf16(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

float F32FromF16(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  float mag;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), -24);  // subnormal (or zero): mant * 2^-24
  } else if (exp == 31) {
    mag = mant == 0 ? std::numeric_limits<float>::infinity()
                    : std::numeric_limits<float>::quiet_NaN();
  } else {
    mag = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -mag : mag;
}

void RopeCosSin(int64_t pos, size_t i, size_t head_dim, double freq_base, float* c, float* s) {
  const double inv_freq =
      std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  const double theta = static_cast<double>(pos) * inv_freq;
  *c = static_cast<float>(std::cos(theta));
  *s = static_cast<float>(std::sin(theta));
}

void RmsNorm(const float* x, const float* w, float* out, size_t rows, size_t d, float eps) {
  for (size_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (size_t i = 0; i < d; ++i) ss += static_cast<double>(x[r * d + i]) * x[r * d + i];
    const double inv = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (size_t i = 0; i < d; ++i) out[r * d + i] = static_cast<float>(x[r * d + i] * inv * w[i]);
  }
}

void Rope(float* x, size_t n_tok, size_t row_stride, size_t n_head, size_t head_dim,
          const int32_t* pos, float freq_base, RopeLayout layout) {
  const size_t half = head_dim / 2;
  for (size_t t = 0; t < n_tok; ++t) {
    for (size_t h = 0; h < n_head; ++h) {
      float* v = x + t * row_stride + h * head_dim;
      for (size_t i = 0; i < half; ++i) {
        float c, s;
        RopeCosSin(pos[t], i, head_dim, freq_base, &c, &s);
        const size_t i0 = layout == RopeLayout::kNormal ? 2 * i : i;
        const size_t i1 = layout == RopeLayout::kNormal ? 2 * i + 1 : i + half;
        const float x0 = v[i0], x1 = v[i1];
        v[i0] = x0 * c - x1 * s;
        v[i1] = x0 * s + x1 * c;
      }
    }
  }
}

void SwiGlu(const float* gate, const float* up, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void Softmax(float* x, size_t n) {
  if (n == 0) return;
  double m = x[0];
  for (size_t i = 1; i < n; ++i) m = std::max(m, static_cast<double>(x[i]));
  double sum = 0;
  std::vector<double> e(n);
  for (size_t i = 0; i < n; ++i) sum += e[i] = std::exp(x[i] - m);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(e[i] / sum);
}

void Attention(const float* q, size_t n_q, size_t q_stride, const float* k, const float* v,
               size_t n_kv, size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim,
               float scale, float* out, size_t out_stride) {
  AttentionMasked(q, n_q, q_stride, k, v, n_kv, kv_stride, n_head, n_kv_head, head_dim, scale, out,
                  out_stride, {});
}

void AttentionMasked(const float* q, size_t n_q, size_t q_stride, const float* k, const float* v,
                     size_t n_kv_all, size_t kv_stride, size_t n_head, size_t n_kv_head,
                     size_t head_dim, float scale, float* out, size_t out_stride,
                     AttentionMask mask) {
  const size_t group = n_head / n_kv_head;
  std::vector<double> p(n_kv_all);
  for (size_t t = 0; t < n_q; ++t) {
    const size_t n_kv = mask.KvEnd(t, n_kv_all);
    for (size_t h = 0; h < n_head; ++h) {
      const float* qh = q + t * q_stride + h * head_dim;
      const size_t g = h / group;
      double m = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < n_kv; ++j) {  // pass 1: scores and their max
        const float* kj = k + j * kv_stride + g * head_dim;
        double dot = 0;
        for (size_t i = 0; i < head_dim; ++i) dot += static_cast<double>(qh[i]) * kj[i];
        p[j] = dot * scale;
        m = std::max(m, p[j]);
      }
      double sum = 0;
      for (size_t j = 0; j < n_kv; ++j) sum += p[j] = std::exp(p[j] - m);
      float* o = out + t * out_stride + h * head_dim;
      for (size_t i = 0; i < head_dim; ++i) {  // pass 2: normalised weighted sum of v
        double acc = 0;
        for (size_t j = 0; j < n_kv; ++j) acc += p[j] * v[j * kv_stride + g * head_dim + i];
        o[i] = n_kv == 0 ? 0.0f : static_cast<float>(acc / sum);
      }
    }
  }
}

void AttentionBf16(const float* q, size_t n_q, size_t q_stride, const float* k, const float* v,
                   size_t n_kv, size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim,
                   float scale, float* out, size_t out_stride) {
  AttentionBf16Masked(q, n_q, q_stride, k, v, n_kv, kv_stride, n_head, n_kv_head, head_dim, scale,
                      out, out_stride, {});
}

void AttentionBf16Masked(const float* q, size_t n_q, size_t q_stride, const float* k,
                         const float* v, size_t n_kv_all, size_t kv_stride, size_t n_head,
                         size_t n_kv_head, size_t head_dim, float scale, float* out,
                         size_t out_stride, AttentionMask mask) {
  auto r = [](float x) { return static_cast<double>(F32FromBf16(Bf16FromF32(x))); };
  const size_t group = n_head / n_kv_head;
  std::vector<double> p(n_kv_all), qr(head_dim);
  for (size_t t = 0; t < n_q; ++t) {
    const size_t n_kv = mask.KvEnd(t, n_kv_all);
    for (size_t h = 0; h < n_head; ++h) {
      const float* qh = q + t * q_stride + h * head_dim;
      const size_t g = h / group;
      for (size_t i = 0; i < head_dim; ++i) qr[i] = r(qh[i] * scale);
      double m = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < n_kv; ++j) {
        const float* kj = k + j * kv_stride + g * head_dim;
        double dot = 0;
        for (size_t i = 0; i < head_dim; ++i) dot += qr[i] * r(kj[i]);
        p[j] = dot;
        m = std::max(m, p[j]);
      }
      double sum = 0;
      for (size_t j = 0; j < n_kv; ++j) {
        p[j] = std::exp(p[j] - m);
        sum += p[j];
        p[j] = r(static_cast<float>(p[j]));
      }
      float* o = out + t * out_stride + h * head_dim;
      for (size_t i = 0; i < head_dim; ++i) {
        double acc = 0;
        for (size_t j = 0; j < n_kv; ++j) acc += p[j] * r(v[j * kv_stride + g * head_dim + i]);
        o[i] = n_kv == 0 ? 0.0f : static_cast<float>(acc / sum);
      }
    }
  }
}

namespace {

inline float QuantF16ToF32(uint16_t h) {
  return F32FromF16(h);
}
#include "kernels/quant_blocks-inl.h"

}  // namespace

void DequantizeRow(format::TensorType type, const void* src, float* dst, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(src);
  switch (type) {
    case format::TensorType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case format::TensorType::F16:
      for (size_t i = 0; i < n; ++i) dst[i] = HalfAt(b + 2 * i);
      return;
    case format::TensorType::BF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, b + 2 * i, 2);
        dst[i] = F32FromBf16(h);
      }
      return;
    default:
      break;
  }
  const BlockFn block = BlockDecoder(type);
  uint64_t block_elems = 0, block_bytes = 0;
  if (block == nullptr || !format::TensorTypeLayout(type, &block_elems, &block_bytes)) {
    throw Error(ErrorKind::kUnsupported, "reference dequantisation: unsupported tensor type " +
                                             format::TensorTypeName(type));
  }
  if (n % block_elems != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "reference dequantisation of " + format::TensorTypeName(type) + ": " +
                    std::to_string(n) + " elements is not a multiple of " +
                    std::to_string(block_elems));
  }
  for (size_t i = 0; i < n / block_elems; ++i) block(b + i * block_bytes, dst + i * block_elems);
}

namespace {

// Per-32 activation quantization of one row (absmax / 127; nearbyint of x * (127 / absmax) in
// float): q[k] and the block scales d[k / 32].
// xr[k] -> q[k], one scale d per `block` values (k / block of them).
void QuantizeRowQ8(const float* xr, size_t k, int* q, float* d, size_t block = 32) {
  for (size_t kb = 0; kb < k / block; ++kb) {
    float amax = 0;
    for (size_t j = 0; j < block; ++j) amax = std::fmax(amax, std::fabs(xr[kb * block + j]));
    const float inv = amax == 0.0f ? 0.0f : 127.0f / amax;
    for (size_t j = 0; j < block; ++j)
      q[kb * block + j] = static_cast<int>(std::nearbyint(xr[kb * block + j] * inv));
    d[kb] = amax == 0.0f ? 0.0f : amax / 127.0f;
  }
}

// v[32c + j] for the two nibbles of 16 bytes (j < 16: low, else high).
void Nibbles(const uint8_t* p, int* v) {
  for (int j = 0; j < 16; ++j) {
    v[j] = p[j] & 0x0F;
    v[j + 16] = p[j] >> 4;
  }
}

int DecodeKQuant(format::TensorType type, const uint8_t* b, int* v, float* a, float* s) {
  using T = format::TensorType;
  switch (type) {
    case T::Q4_K:
    case T::Q5_K: {
      const bool five = type == T::Q5_K;
      const float d = HalfAt(b), dmin = HalfAt(b + 2);
      const uint8_t* qh = b + 16;
      const uint8_t* qs = b + (five ? 48 : 16);
      for (int p = 0; p < 4; ++p) {
        for (int l = 0; l < 32; ++l) {
          const uint8_t q = qs[32 * p + l];
          v[64 * p + l] = (q & 0x0F) | (five ? ((qh[l] >> (2 * p)) & 1) << 4 : 0);
          v[64 * p + 32 + l] = (q >> 4) | (five ? ((qh[l] >> (2 * p + 1)) & 1) << 4 : 0);
        }
      }
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        ScaleMinK4(j, b + 4, &sc, &m);
        a[j] = d * static_cast<float>(sc);
        s[j] = dmin * static_cast<float>(m);
      }
      return 32;
    }
    case T::Q6_K: {
      const float d = HalfAt(b + 208);
      const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = b + 64 * h;
        const uint8_t* qh = b + 128 + 32 * h;
        for (int l = 0; l < 32; ++l) {
          v[128 * h + l] = (ql[l] & 0x0F) | (qh[l] & 3) << 4;
          v[128 * h + 32 + l] = (ql[l + 32] & 0x0F) | ((qh[l] >> 2) & 3) << 4;
          v[128 * h + 64 + l] = (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4;
          v[128 * h + 96 + l] = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4;
        }
      }
      for (int j = 0; j < 16; ++j) {
        a[j] = d * static_cast<float>(sc[j]);
        s[j] = 32.0f * a[j];
      }
      return 16;
    }
    case T::Q3_K: {
      const uint8_t* hm = b;
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
          for (int l = 0; l < 32; ++l) {
            v[128 * h + 32 * k + l] =
                ((b[32 + 32 * h + l] >> (2 * k)) & 3) + 4 * ((hm[l] >> (4 * h + k)) & 1);
          }
        }
      }
      const float d = HalfAt(b + 108);
      const uint8_t* sb = b + 96;
      for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? (sb[j] & 0x0F) : (sb[j - 8] >> 4);
        const int hi = (sb[8 + j % 4] >> (2 * (j / 4))) & 3;
        a[j] = d * static_cast<float>((lo | (hi << 4)) - 32);
        s[j] = 4.0f * a[j];
      }
      return 16;
    }
    case T::Q2_K: {
      for (int h = 0; h < 2; ++h)
        for (int k = 0; k < 4; ++k)
          for (int l = 0; l < 32; ++l)
            v[128 * h + 32 * k + l] = (b[16 + 32 * h + l] >> (2 * k)) & 3;
      const float d = HalfAt(b + 80), dmin = HalfAt(b + 82);
      for (int j = 0; j < 16; ++j) {
        a[j] = d * static_cast<float>(b[j] & 0x0F);
        s[j] = dmin * static_cast<float>(b[j] >> 4);
      }
      return 16;
    }
    case T::IQ4_XS: {
      const float d = HalfAt(b);
      uint16_t scales_h;
      std::memcpy(&scales_h, b + 2, 2);
      for (int ib = 0; ib < 8; ++ib) {
        Nibbles(b + 8 + 16 * ib, v + 32 * ib);
        for (int j = 0; j < 32; ++j) v[32 * ib + j] = kIq4Values[v[32 * ib + j]];
        const int ls =
            ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
        a[ib] = d * static_cast<float>(ls - 32);
        s[ib] = 0.0f;
      }
      return 32;
    }
    default:
      return 0;
  }
}

// One 32-value block of a legacy type into v[32], a, s; false for another type.
bool DecodeBlock32(format::TensorType type, const uint8_t* b, int* v, float* a, float* s) {
  using T = format::TensorType;
  switch (type) {
    case T::Q8_0:
      for (int j = 0; j < 32; ++j) v[j] = static_cast<int8_t>(b[2 + j]);
      *a = HalfAt(b);
      *s = 0.0f;
      return true;
    case T::Q4_0:
    case T::IQ4_NL:
      Nibbles(b + 2, v);
      *a = HalfAt(b);
      *s = 8.0f * *a;
      if (type == T::IQ4_NL) {
        for (int j = 0; j < 32; ++j) v[j] = kIq4Values[v[j]];
        *s = 0.0f;
      }
      return true;
    case T::Q4_1:
      Nibbles(b + 4, v);
      *a = HalfAt(b);
      *s = -HalfAt(b + 2);
      return true;
    case T::Q5_0:
    case T::Q5_1: {
      const bool one = type == T::Q5_1;
      uint32_t qh;
      std::memcpy(&qh, b + (one ? 4 : 2), 4);
      Nibbles(b + (one ? 8 : 6), v);
      for (int j = 0; j < 32; ++j) v[j] |= static_cast<int>((qh >> j) & 1) << 4;
      *a = HalfAt(b);
      *s = one ? -HalfAt(b + 2) : 16.0f * *a;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

int DecodeIntSuperblock(format::TensorType type, const uint8_t* sb, int* v, float* a, float* b) {
  if (const int sub = DecodeKQuant(type, sb, v, a, b); sub != 0) return sub;
  uint64_t block_elems = 0, block_bytes = 0;
  if (!format::TensorTypeLayout(type, &block_elems, &block_bytes) || block_elems != 32) return 0;
  for (int c = 0; c < 8; ++c) {
    if (!DecodeBlock32(type, sb + c * block_bytes, v + 32 * c, a + c, b + c)) return 0;
  }
  return 32;
}

void FewRowsProduct(format::TensorType type, const float* x, size_t n, size_t in, const uint8_t* w,
                    size_t row_bytes, size_t out, float* y) {
  uint64_t block_elems = 0, block_bytes = 0;
  format::TensorTypeLayout(type, &block_elems, &block_bytes);
  const size_t super_bytes = block_bytes * 256 / block_elems;
  std::vector<int> q(in), v(256);
  std::vector<float> d(in / 32);
  float a[16], b[16];
  const size_t block = FewRowsPer256(type) ? 256 : 32;
  for (size_t r = 0; r < n; ++r) {
    QuantizeRowQ8(x + r * in, in, q.data(), d.data(), block);
    for (size_t o = 0; o < out; ++o) {
      double acc = 0;
      for (size_t sb = 0; sb < in / 256; ++sb) {
        const int sub =
            DecodeIntSuperblock(type, w + o * row_bytes + sb * super_bytes, v.data(), a, b);
        if (sub == 0) {
          throw Error(
              ErrorKind::kUnsupported,
              "reference few-row product: no integer decoder for " + format::TensorTypeName(type));
        }
        for (int j = 0; j < 256 / sub; ++j) {
          int64_t dot = 0, sum = 0;
          for (int i = j * sub; i < (j + 1) * sub; ++i) {
            dot += static_cast<int64_t>(v[i]) * q[sb * 256 + i];
            sum += q[sb * 256 + i];
          }
          const double dx = d[(sb * 256 + static_cast<size_t>(j * sub)) / block];
          acc += static_cast<double>(a[j]) * dx * static_cast<double>(dot) -
                 static_cast<double>(b[j]) * dx * static_cast<double>(sum);
        }
      }
      y[r * out + o] = static_cast<float>(acc);
    }
  }
}

void Q8_0ProductInt8(const float* x, size_t n, size_t in, const uint8_t* w, size_t row_bytes,
                     size_t out, float* y) {
  const size_t kbs = in / 32;
  std::vector<int> q(in);
  std::vector<float> d(kbs);
  for (size_t r = 0; r < n; ++r) {
    QuantizeRowQ8(x + r * in, in, q.data(), d.data());
    for (size_t o = 0; o < out; ++o) {
      const uint8_t* row = w + o * row_bytes;
      double acc = 0;
      for (size_t kb = 0; kb < kbs; ++kb) {
        const uint8_t* blk = row + kb * 34;
        int64_t dot = 0;
        for (size_t j = 0; j < 32; ++j)
          dot += static_cast<int64_t>(static_cast<int8_t>(blk[2 + j])) * q[kb * 32 + j];
        acc += static_cast<double>(dot) * static_cast<double>(HalfAt(blk) * d[kb]);
      }
      y[r * out + o] = static_cast<float>(acc);
    }
  }
}

void MatMulNT(const float* x, const float* w, float* y, size_t n, size_t in, size_t out) {
  for (size_t r = 0; r < n; ++r) {
    for (size_t o = 0; o < out; ++o) {
      double acc = 0;
      for (size_t i = 0; i < in; ++i) acc += static_cast<double>(x[r * in + i]) * w[o * in + i];
      y[r * out + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace bicache::kernels::ref
