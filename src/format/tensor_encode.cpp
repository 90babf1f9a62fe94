// float32 -> storage-format encoders: F32, F16, BF16, Q8_0, Q4_0 here (bit-compatible with
// ggml's reference quantisers), Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K in quantize_k.cpp.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "format/quantize.h"

namespace bicache::format {
namespace {

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

// IEEE binary16 with round-to-nearest-even, including subnormals, overflow to inf, and NaN.
uint16_t FloatToHalf(float value) {
  uint32_t x = FloatBits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x >= 0x7f800000) {  // inf stays inf; NaN stays a (quiet) NaN
    return sign | 0x7c00 | (x > 0x7f800000 ? 0x0200 | ((x >> 13) & 0x3ff) : 0);
  }
  if (x >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds (ties to even) to inf
  if (x < 0x38800000) {                       // below 2^-14: a half subnormal m * 2^-24
    float magnitude;
    std::memcpy(&magnitude, &x, 4);
    // Scaling by 2^24 is exact; nearbyint rounds ties to even in the default FP mode.
    // m == 1024 lands exactly on the smallest normal's encoding.
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  // Normal: rebias the exponent (127 -> 15), then round the 13 dropped mantissa bits to even.
  // A carry out of the mantissa correctly bumps the exponent.
  uint32_t rebased = x - 0x38000000;
  uint32_t rounded = rebased + 0x0fff + ((rebased >> 13) & 1);
  return sign | static_cast<uint16_t>(rounded >> 13);
}

namespace {

uint16_t FloatToBf16(float value) {
  uint32_t x = FloatBits(value);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

void PutU16(uint8_t* dst, uint16_t v) {
  std::memcpy(dst, &v, 2);
}

void RequireBlocks(TensorType type, size_t n, size_t block) {
  if (n % block != 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "cannot encode " + std::to_string(n) + " values as " + TensorTypeName(type) +
                    ": the count must be a multiple of the block size " + std::to_string(block));
  }
}

// Q8_0 block (34 B): f16 d = max|x| / 127, then 32 int8 q = round(x / d).
void EncodeQ8_0Block(const float* x, uint8_t* out) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  PutU16(out, FloatToHalf(d));
  for (int j = 0; j < 32; ++j) {
    out[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(x[j] * id)));
  }
}

// Q4_0 block (18 B): f16 d = (the value of largest magnitude, with its sign) / -8, then nibbles
// q = clamp(x / d + 8) in [0, 15]; element j in the low nibble of byte j, j + 16 in the high.
void EncodeQ4_0Block(const float* x, uint8_t* out) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  PutU16(out, FloatToHalf(d));
  auto quant = [&](float v) -> uint8_t {
    // +8.5 then truncate == round half up of x/d + 8; the extreme value maps to 0, so only the
    // top needs clamping.
    int q = static_cast<int>(static_cast<int8_t>(v * id + 8.5f));
    return static_cast<uint8_t>(q > 15 ? 15 : q);
  };
  for (int j = 0; j < 16; ++j) {
    out[2 + j] = quant(x[j]) | static_cast<uint8_t>(quant(x[j + 16]) << 4);
  }
}

}  // namespace

bool CanEncode(TensorType type) {
  switch (type) {
    case TensorType::F32:
    case TensorType::F16:
    case TensorType::BF16:
    case TensorType::Q8_0:
    case TensorType::Q4_0:
    case TensorType::Q4_1:
    case TensorType::Q5_0:
    case TensorType::Q5_1:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
    case TensorType::Q6_K:
      return true;
    default:
      return false;
  }
}

const char* EncodableTypeList() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";
}

void EncodeRow(TensorType type, const float* src, size_t n, uint8_t* dst) {
  using BlockFn = void (*)(const float*, uint8_t*);
  BlockFn fn = nullptr;
  switch (type) {
    case TensorType::F32:
      if (n) std::memcpy(dst, src, n * 4);
      return;
    case TensorType::F16:
      for (size_t i = 0; i < n; ++i) PutU16(dst + 2 * i, FloatToHalf(src[i]));
      return;
    case TensorType::BF16:
      for (size_t i = 0; i < n; ++i) PutU16(dst + 2 * i, FloatToBf16(src[i]));
      return;
    case TensorType::Q8_0:
      fn = EncodeQ8_0Block;
      break;
    case TensorType::Q4_0:
      fn = EncodeQ4_0Block;
      break;
    case TensorType::Q4_1:
      fn = detail::EncodeQ4_1Block;
      break;
    case TensorType::Q5_0:
      fn = detail::EncodeQ5_0Block;
      break;
    case TensorType::Q5_1:
      fn = detail::EncodeQ5_1Block;
      break;
    case TensorType::Q4_K:
      fn = detail::EncodeQ4_KBlock;
      break;
    case TensorType::Q5_K:
      fn = detail::EncodeQ5_KBlock;
      break;
    case TensorType::Q6_K:
      fn = detail::EncodeQ6_KBlock;
      break;
    default:
      throw Error(ErrorKind::kUnsupported, "cannot encode tensors of type " + TensorTypeName(type) +
                                               " (supported: " + EncodableTypeList() + ")");
  }
  uint64_t block_elems = 0, block_bytes = 0;
  TensorTypeLayout(type, &block_elems, &block_bytes);
  RequireBlocks(type, n, block_elems);
  for (size_t b = 0; b < n / block_elems; ++b) fn(src + block_elems * b, dst + block_bytes * b);
}

std::vector<uint8_t> EncodeTensor(TensorType type, std::span<const float> values) {
  if (!CanEncode(type)) EncodeRow(type, nullptr, 0, nullptr);  // throws kUnsupported
  uint64_t block_elems = 0, block_bytes = 0;
  TensorTypeLayout(type, &block_elems, &block_bytes);
  RequireBlocks(type, values.size(), block_elems);
  std::vector<uint8_t> out(values.size() / block_elems * block_bytes);
  EncodeRow(type, values.data(), values.size(), out.data());
  return out;
}

}  // namespace bicache::format
