// DequantizeRow / DequantizeRowBf16 (matmul.h): stored tensor rows -> float32 or bf16, for every
// type this project reads. Quantized matrices are never expanded whole: Linear dequantizes one
// panel of rows at a time into a cache-sized buffer right before multiplying it, and embeddings
// dequantize only the rows a forward gathers, so these run on the hot path.
//
// The block decoders (quant_blocks-inl.h, shared with the scalar twin in reference.cpp) are
// compiled here once per Highway target and picked at run time, so the compiler can vectorise
// their fixed-length loops with the widest instruction set of the CPU.

// clang-format off: Highway needs foreach_target.h, then highway.h, in this order
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequant.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/highway.h>
// clang-format on

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "format/tensor_type.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/reference.h"
#include "util/error.h"
#include "util/grow.h"

HWY_BEFORE_NAMESPACE();
namespace bicache::kernels::HWY_NAMESPACE {

// IEEE binary16 -> float without branches on the common path: the exponent is rebiased by a
// multiply with 2^112 (exact, and it also normalises subnormals); inf and NaN keep their payload.
inline float QuantF16ToF32(uint16_t h) {
  const uint32_t em = h & 0x7FFFu;
  uint32_t bits = em << 13;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= 0x1p112f;
  std::memcpy(&bits, &f, 4);
  if (em >= 0x7C00u) bits = 0x7F800000u | ((em & 0x3FFu) << 13);
  bits |= static_cast<uint32_t>(h & 0x8000u) << 16;
  std::memcpy(&f, &bits, 4);
  return f;
}
#include "kernels/quant_blocks-inl.h"

#if HWY_TARGET != HWY_SCALAR
// Hand-vectorised decoders of the common types. Each unpacks its quants into small byte arrays
// with 16-byte vector operations (available on every non-scalar target), then widens them to
// float with the target's full width: y = q * a - b per group of equally scaled elements. The
// products are exact in float for every type but Q6_K (whose 25-bit products may round once
// where ggml's separate multiply rounds the same way), so results equal ggml's within one ulp.
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using D8 = hn::Full128<uint8_t>;

// y[0, count) = q[i] * a - b, q read as int8 (kSigned) or uint8; count a multiple of 16.
template <bool kSigned>
HWY_INLINE void ScaleBytes(const uint8_t* q, size_t count, float a, float b, float* y) {
  using Q = std::conditional_t<kSigned, int8_t, uint8_t>;
  const DF df;
  const hn::Rebind<int32_t, DF> di;
  const hn::Rebind<Q, DF> dq;
  const auto va = hn::Set(df, a), vb = hn::Set(df, b);
  for (size_t i = 0; i < count; i += hn::Lanes(df)) {
    const auto v =
        hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(dq, reinterpret_cast<const Q*>(q) + i)));
    hn::StoreU(hn::MulSub(v, va, vb), df, y + i);
  }
}

// 16 packed bytes -> their low nibbles at lo[0..16), high nibbles at hi[0..16).
HWY_INLINE void Nibbles16(const uint8_t* src, uint8_t* lo, uint8_t* hi) {
  const D8 d8;
  const auto v = hn::LoadU(d8, src);
  hn::StoreU(hn::And(v, hn::Set(d8, 0x0F)), d8, lo);
  hn::StoreU(hn::ShiftRight<4>(v), d8, hi);
}

void SimdQ8_0(const uint8_t* b, float* y) {
  ScaleBytes<true>(b + 2, 32, HalfAt(b), 0.0f, y);
}

void SimdQ4_0(const uint8_t* b, float* y) {  // (q - 8) * d = q * d - 8d, both exact
  alignas(16) uint8_t q[32];
  Nibbles16(b + 2, q, q + 16);
  const float d = HalfAt(b);
  ScaleBytes<false>(q, 32, d, 8.0f * d, y);
}

void SimdQ4_1(const uint8_t* b, float* y) {
  alignas(16) uint8_t q[32];
  Nibbles16(b + 4, q, q + 16);
  ScaleBytes<false>(q, 32, HalfAt(b), -HalfAt(b + 2), y);
}

// Q4_K / Q5_K: sub-blocks j and j+1 of a super-block (unpacked quants lo and hi, 32 each) to
// y[0, 64) with their 6-bit scales and mins.
HWY_INLINE void ScalePairK(const uint8_t* b, int j, float d, float dmin, const uint8_t* lo,
                           const uint8_t* hi, float* y) {
  int sc, m;
  ScaleMinK4(j, b + 4, &sc, &m);
  ScaleBytes<false>(lo, 32, d * static_cast<float>(sc), dmin * static_cast<float>(m), y);
  ScaleMinK4(j + 1, b + 4, &sc, &m);
  ScaleBytes<false>(hi, 32, d * static_cast<float>(sc), dmin * static_cast<float>(m), y + 32);
}

void SimdQ4_K(const uint8_t* b, float* y) {
  const float d = HalfAt(b), dmin = HalfAt(b + 2);
  const uint8_t* qs = b + 16;
  alignas(16) uint8_t lo[32], hi[32];
  for (int j = 0; j < 8; j += 2, qs += 32, y += 64) {
    Nibbles16(qs, lo, hi);
    Nibbles16(qs + 16, lo + 16, hi + 16);
    ScalePairK(b, j, d, dmin, lo, hi, y);
  }
}

void SimdQ5_K(const uint8_t* b, float* y) {
  const D8 d8;
  const float d = HalfAt(b), dmin = HalfAt(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  const auto low4 = hn::Set(d8, 0x0F), bit4 = hn::Set(d8, 0x10);
  alignas(16) uint8_t lo[32], hi[32];
  for (int j = 0; j < 8; j += 2, qs += 32, y += 64) {
    for (int h = 0; h < 32;
         h += 16) {  // element l takes bit j of qh[l] (low nibble), bit j+1 (high)
      const auto v = hn::LoadU(d8, qs + h), vh = hn::LoadU(d8, qh + h);
      const auto h0 = hn::And(hn::ShiftLeft<4>(hn::ShiftRightSame(vh, j)), bit4);
      const auto h1 = hn::And(hn::ShiftLeft<4>(hn::ShiftRightSame(vh, j + 1)), bit4);
      hn::StoreU(hn::Or(hn::And(v, low4), h0), d8, lo + h);
      hn::StoreU(hn::Or(hn::ShiftRight<4>(v), h1), d8, hi + h);
    }
    ScalePairK(b, j, d, dmin, lo, hi, y);
  }
}

void SimdQ6_K(const uint8_t* b, float* y) {
  const D8 d8;
  const float d = HalfAt(b + 208);
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const auto low4 = hn::Set(d8, 0x0F), two = hn::Set(d8, 0x03);
  alignas(16) uint8_t q[4][16];
  for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l0 = 0; l0 < 32; l0 += 16) {
      const auto a = hn::LoadU(d8, ql + l0), c = hn::LoadU(d8, ql + l0 + 32),
                 h = hn::LoadU(d8, qh + l0);
      hn::StoreU(hn::Or(hn::And(a, low4), hn::ShiftLeft<4>(hn::And(h, two))), d8, q[0]);
      hn::StoreU(hn::Or(hn::And(c, low4), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), two))), d8,
                 q[1]);
      hn::StoreU(hn::Or(hn::ShiftRight<4>(a), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), two))),
                 d8, q[2]);
      hn::StoreU(hn::Or(hn::ShiftRight<4>(c), hn::ShiftLeft<4>(hn::ShiftRight<6>(h))), d8, q[3]);
      const int is = l0 / 16;
      for (int k = 0; k < 4; ++k) {  // q[k] holds elements 32k + l0 .. +16, scale sc[is + 2k]
        const float a_k = d * static_cast<float>(sc[is + 2 * k]);
        ScaleBytes<false>(q[k], 16, a_k, 32.0f * a_k, y + 32 * k + l0);
      }
    }
  }
}

// IQ4_NL / IQ4_XS: nibbles index the 16-entry codebook (a byte shuffle), then int8 * scale.
HWY_INLINE void Iq4Lookup16(const uint8_t* src, uint8_t* lo, uint8_t* hi) {
  const D8 d8;
  const auto table = hn::LoadU(d8, reinterpret_cast<const uint8_t*>(kIq4Values));
  const auto v = hn::LoadU(d8, src);
  hn::StoreU(hn::TableLookupBytes(table, hn::And(v, hn::Set(d8, 0x0F))), d8, lo);
  hn::StoreU(hn::TableLookupBytes(table, hn::ShiftRight<4>(v)), d8, hi);
}

void SimdIq4Nl(const uint8_t* b, float* y) {
  alignas(16) uint8_t q[32];
  Iq4Lookup16(b + 2, q, q + 16);
  ScaleBytes<true>(q, 32, HalfAt(b), 0.0f, y);
}

void SimdIq4Xs(const uint8_t* b, float* y) {
  const float d = HalfAt(b);
  uint16_t scales_h;
  std::memcpy(&scales_h, b + 2, 2);
  const uint8_t* qs = b + 8;
  alignas(16) uint8_t q[32];
  for (int ib = 0; ib < 8; ++ib, qs += 16, y += 32) {
    const int ls = ((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F) | (((scales_h >> (2 * ib)) & 3) << 4);
    Iq4Lookup16(qs, q, q + 16);
    ScaleBytes<true>(q, 32, d * static_cast<float>(ls - 32), 0.0f, y);
  }
}

BlockFn FastDecoder(format::TensorType type) {
  using T = format::TensorType;
  switch (type) {
    case T::Q8_0:
      return SimdQ8_0;
    case T::Q4_0:
      return SimdQ4_0;
    case T::Q4_1:
      return SimdQ4_1;
    case T::Q4_K:
      return SimdQ4_K;
    case T::Q5_K:
      return SimdQ5_K;
    case T::Q6_K:
      return SimdQ6_K;
    case T::IQ4_NL:
      return SimdIq4Nl;
    case T::IQ4_XS:
      return SimdIq4Xs;
    default:
      return BlockDecoder(type);  // Q5_0, Q5_1, Q2_K, Q3_K: the shared scalar decoders
  }
}
#else
BlockFn FastDecoder(format::TensorType type) {
  return BlockDecoder(type);
}
#endif  // HWY_TARGET != HWY_SCALAR

// Decodes n_blocks consecutive blocks of `type` (a type BlockDecoder knows) into dst.
void DequantBlocksImpl(format::TensorType type, const uint8_t* src, float* dst, size_t n_blocks) {
  uint64_t block_elems = 0, block_bytes = 0;
  format::TensorTypeLayout(type, &block_elems, &block_bytes);
  const BlockFn block = FastDecoder(type);
  for (size_t i = 0; i < n_blocks; ++i) block(src + i * block_bytes, dst + i * block_elems);
}

}  // namespace bicache::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace bicache::kernels {

HWY_EXPORT(DequantBlocksImpl);

bool IsBlockQuantized(format::TensorType type) {
  using T = format::TensorType;
  switch (type) {
    case T::Q4_0:
    case T::Q4_1:
    case T::Q5_0:
    case T::Q5_1:
    case T::Q8_0:
    case T::Q2_K:
    case T::Q3_K:
    case T::Q4_K:
    case T::Q5_K:
    case T::Q6_K:
    case T::IQ4_NL:
    case T::IQ4_XS:
      return true;
    default:
      return false;
  }
}

bool IsComputeType(format::TensorType type) {
  using T = format::TensorType;
  return type == T::F32 || type == T::F16 || type == T::BF16 || IsBlockQuantized(type);
}

const char* ComputeTypeList() {
  return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
         "IQ4_XS";
}

namespace {

// Throws Error(kUnsupported) naming a type this file cannot read and Error(kInvalidArgument) for a
// partial block; otherwise returns the type's block layout.
void CheckDequantizable(format::TensorType type, size_t n, uint64_t* block_elems,
                        uint64_t* block_bytes) {
  if (!IsComputeType(type) || !format::TensorTypeLayout(type, block_elems, block_bytes)) {
    throw Error(ErrorKind::kUnsupported, "cannot dequantise tensor type " +
                                             format::TensorTypeName(type) +
                                             " (supported: " + ComputeTypeList() + ")");
  }
  if (n % *block_elems != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "dequantise " + format::TensorTypeName(type) + ": " + std::to_string(n) +
                    " elements is not a multiple of " + std::to_string(*block_elems));
  }
}

}  // namespace

void DequantizeRow(format::TensorType type, const void* src, float* dst, size_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(src);
  switch (type) {
    case format::TensorType::F32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case format::TensorType::F16:
    case format::TensorType::BF16: {
      // The source may be unaligned for uint16_t inside a mapping; copy through a small buffer.
      uint16_t tmp[256];
      for (size_t i = 0; i < n; i += 256) {
        const size_t m = std::min<size_t>(256, n - i);
        std::memcpy(tmp, b + 2 * i, 2 * m);
        if (type == format::TensorType::F16) {
          F16ToF32(tmp, dst + i, m);
        } else {
          Bf16ToF32(tmp, dst + i, m);
        }
      }
      return;
    }
    default:
      break;
  }
  uint64_t block_elems = 0, block_bytes = 0;
  CheckDequantizable(type, n, &block_elems, &block_bytes);
  HWY_DYNAMIC_DISPATCH(DequantBlocksImpl)(type, b, dst, n / block_elems);
}

void DequantizeRowBf16(format::TensorType type, const void* src, uint16_t* dst, size_t n) {
  if (type == format::TensorType::BF16) {
    std::memcpy(dst, src, n * 2);
    return;
  }
  // Through float32 in chunks that stay in L1 (a multiple of every block size).
  constexpr size_t kChunk = 1024;
  uint64_t block_elems = 1, block_bytes = 0;
  CheckDequantizable(type, n, &block_elems, &block_bytes);
  thread_local std::vector<float> buf;
  float* f = GrowTo(buf, kChunk);
  const uint8_t* b = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = std::min(kChunk, n - i);
    DequantizeRow(type, b + i / block_elems * block_bytes, f, m);
    F32ToBf16(f, dst + i, m);
  }
}

}  // namespace bicache::kernels
#endif  // HWY_ONCE
