// DequantizeRow (matmul.h): stored tensor rows -> float32. Used at load time (weights converted
// to bf16 once) and for single embedding rows, so clarity beats SIMD here except for the
// float16/bfloat16 paths, which reuse the vector converters.
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/reference.h"
#include "util/error.h"

namespace bicache::kernels {
namespace {

constexpr size_t kQBlockElems = 32;
constexpr size_t kQ8Bytes = 34;  // f16 scale + 32 x int8
constexpr size_t kQ4Bytes = 18;  // f16 scale + 16 bytes of nibble pairs

float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return ref::F32FromF16(h);
}

void CheckBlocks(const char* type, size_t n) {
  if (n % kQBlockElems != 0) {
    throw Error(ErrorKind::kInvalidArgument, std::string("dequantise ") + type + ": " +
                                                 std::to_string(n) +
                                                 " elements is not a multiple of 32");
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
    case format::TensorType::Q8_0:
      CheckBlocks("Q8_0", n);
      for (size_t blk = 0; blk < n / kQBlockElems; ++blk) {
        const uint8_t* p = b + blk * kQ8Bytes;
        const float d = HalfAt(p);
        float* o = dst + blk * kQBlockElems;
        for (size_t j = 0; j < kQBlockElems; ++j) o[j] = d * static_cast<float>(static_cast<int8_t>(p[2 + j]));
      }
      return;
    case format::TensorType::Q4_0:
      CheckBlocks("Q4_0", n);
      for (size_t blk = 0; blk < n / kQBlockElems; ++blk) {
        const uint8_t* p = b + blk * kQ4Bytes;
        const float d = HalfAt(p);
        float* o = dst + blk * kQBlockElems;
        for (size_t j = 0; j < 16; ++j) {
          o[j] = d * static_cast<float>(static_cast<int>(p[2 + j] & 0x0F) - 8);       // low nibble
          o[j + 16] = d * static_cast<float>(static_cast<int>(p[2 + j] >> 4) - 8);   // high nibble
        }
      }
      return;
    default:
      throw Error(ErrorKind::kUnsupported,
                  "cannot dequantise tensor type " + std::to_string(static_cast<uint32_t>(type)) +
                      " (supported: F32, F16, BF16, Q8_0, Q4_0)");
  }
}

}  // namespace bicache::kernels
