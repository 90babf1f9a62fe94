// Block-quantized weights: the dispatched dequantizers against their scalar twins on every
// compiled SIMD target, the bf16 variant, and Linear reading quantized rows panel by panel against
// the same weights converted to bf16 up front.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/few_rows.h"
#include "kernels/linear_route.h"
#include "kernels/matmul.h"
#include "kernels/reference.h"
#include "test_util.h"
#include "util/error.h"

namespace bicache::kernels {
namespace {

using format::TensorType;

constexpr TensorType kBlockTypes[] = {TensorType::Q4_0, TensorType::Q4_1,   TensorType::Q5_0,
                                      TensorType::Q5_1, TensorType::Q8_0,   TensorType::Q2_K,
                                      TensorType::Q3_K, TensorType::Q4_K,   TensorType::Q5_K,
                                      TensorType::Q6_K, TensorType::IQ4_NL, TensorType::IQ4_XS};

// Byte offsets of the f16 scale fields inside one block of `type` (d, and dmin / m where present).
std::vector<size_t> HalfFields(TensorType type) {
  switch (type) {
    case TensorType::Q4_1:
    case TensorType::Q5_1:
    case TensorType::Q4_K:
    case TensorType::Q5_K:
      return {0, 2};
    case TensorType::Q2_K:
      return {80, 82};
    case TensorType::Q3_K:
      return {108};
    case TensorType::Q6_K:
      return {208};
    default:
      return {0};
  }
}

// `n_blocks` random blocks whose f16 scales are finite, +-[1/512, 1/4) (random bytes elsewhere).
std::vector<uint8_t> RandomBlocks(TensorType type, size_t n_blocks, uint32_t seed) {
  uint64_t elems = 0, bytes = 0;
  format::TensorTypeLayout(type, &elems, &bytes);
  std::mt19937 rng(seed);
  std::vector<uint8_t> buf(n_blocks * bytes);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t i = 0; i < n_blocks; ++i) {
    for (size_t off : HalfFields(type)) {
      // exponent 6..13 (2^-9 .. 2^-2), random mantissa and sign
      const auto h =
          static_cast<uint16_t>((rng() & 0x8000) | ((6 + rng() % 8) << 10) | (rng() & 0x3FF));
      std::memcpy(&buf[i * bytes + off], &h, 2);
    }
  }
  return buf;
}

uint64_t BlockElems(TensorType type) {
  uint64_t elems = 0, bytes = 0;
  format::TensorTypeLayout(type, &elems, &bytes);
  return elems;
}

// Within one float ulp: the vectorised decoders may fuse a multiply-add the scalar twin rounds
// twice.
void ExpectUlpClose(float got, float want, const std::string& where) {
  const float tol = std::fabs(want) * 1.2e-7f + 1e-30f;
  ASSERT_NEAR(got, want, tol) << where;
}

TEST(KernelsQuant, EveryTypeOnEverySimdTargetMatchesScalarTwin) {
  const auto targets = hwy::SupportedAndGeneratedTargets();
  ASSERT_FALSE(targets.empty());
  for (const int64_t target : targets) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    hwy::SupportedTargets();
    for (TensorType type : kBlockTypes) {
      SCOPED_TRACE(format::TensorTypeName(type));
      const size_t n = 2 * 256;  // two super-blocks, sixteen 32-blocks
      const auto blocks = RandomBlocks(type, n / BlockElems(type), 7 + static_cast<uint32_t>(type));
      std::vector<uint8_t> unaligned(blocks.size() + 1);
      std::memcpy(unaligned.data() + 1, blocks.data(),
                  blocks.size());  // mapped rows need not be aligned
      std::vector<float> got(n), want(n);
      ref::DequantizeRow(type, blocks.data(), want.data(), n);
      DequantizeRow(type, unaligned.data() + 1, got.data(), n);
      for (size_t i = 0; i < n; ++i)
        ExpectUlpClose(got[i], want[i], "element " + std::to_string(i));
      std::vector<uint16_t> got16(n);
      DequantizeRowBf16(type, blocks.data(), got16.data(), n);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_NEAR(ref::F32FromBf16(got16[i]), want[i], std::fabs(want[i]) * 4e-3f) << i;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
  hwy::SupportedTargets();
}

TEST(KernelsQuant, PartialBlocksAndUnreadableTypesAreErrors) {
  std::vector<uint8_t> buf(1024, 0);
  std::vector<float> out(512);
  std::vector<uint16_t> out16(512);
  for (TensorType type : kBlockTypes) {
    const size_t n = BlockElems(type) + 16;  // one block and half of the next
    EXPECT_THROW(DequantizeRow(type, buf.data(), out.data(), n), Error);
    EXPECT_THROW(DequantizeRowBf16(type, buf.data(), out16.data(), n), Error);
  }
  try {
    DequantizeRow(TensorType::Q8_K, buf.data(), out.data(), 256);
    FAIL() << "Q8_K is not a weight type";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("Q8_K"), std::string::npos) << e.what();
  }
}

using bicache::testing::MakeMatrixTensor;

// A quantized Linear on the panel route (dequantized panel by panel at each product) gives what the
// same weights give converted to bf16 at load: same operands, so only oneDNN's summation order may
// differ.
TEST(KernelsQuant, QuantizedLinearMatchesDequantizedWeights) {
  // out 600 spans several panels and a ragged last one; n covers the run-time-M and fixed-M paths.
  const size_t in = 512, out = 600;
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0, TensorType::IQ4_XS,
                          TensorType::Q5_0, TensorType::BF16}) {
    SCOPED_TRACE(format::TensorTypeName(type));
    std::vector<uint8_t> bytes;
    if (type == TensorType::BF16) {
      std::mt19937 rng(3);
      std::normal_distribution<float> dist(0.0f, 0.05f);
      bytes.resize(in * out * 2);
      for (size_t i = 0; i < in * out; ++i) {
        const uint16_t h = ref::Bf16FromF32(dist(rng));
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    } else {
      bytes = RandomBlocks(type, in * out / BlockElems(type), 11);
    }
    std::vector<float> w(in * out);
    ref::DequantizeRow(type, bytes.data(), w.data(), in * out);
    const Linear quantized =
        Linear::FromTensor(MakeMatrixTensor(type, in, out, bytes, "blk.0.ffn_up.weight"));
    const Linear dense = Linear::FromF32(w.data(), out, in);
    EXPECT_EQ(quantized.storage_type(), type);
    EXPECT_EQ(quantized.owned_bytes(), 0u);  // read in place, never expanded
    for (size_t n : {1, 17, 64, 130}) {
      // The integer routes round the activations to 8 bits: kernels_few_rows_test.cpp and
      // kernels_int8_test.cpp test them.
      if (ChooseLinearRoute(type, true, n, in, ActiveMatmulPrecision(), ActiveIntIsa()) !=
          LinearRoute::kPanels) {
        continue;
      }
      std::mt19937 rng(static_cast<uint32_t>(n));
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> x(n * in), a(n * out, -1.0f), b(n * out, -2.0f);
      for (auto& v : x) v = dist(rng);
      quantized.Forward(x.data(), n, a.data());
      dense.Forward(x.data(), n, b.data());
      // Float sums in another order: the bound scales with sum_i |x_i w_i| (the size of the terms).
      for (size_t r = 0; r < n; ++r) {
        for (size_t o = 0; o < out; ++o) {
          double mag = 0;
          for (size_t i = 0; i < in; ++i) mag += std::fabs(x[r * in + i] * w[o * in + i]);
          ASSERT_NEAR(a[r * out + o], b[r * out + o], 1e-5 * mag + 1e-6)
              << "n=" << n << " at [" << r << ", " << o << "]";
        }
      }
    }
  }
}

}  // namespace
}  // namespace bicache::kernels
