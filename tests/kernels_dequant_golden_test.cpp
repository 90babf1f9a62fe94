// DequantizeRow (dispatched SIMD and the scalar reference) on golden blocks of every ggml type
// bicache reads, against values from an independent implementation: llama.cpp's gguf-py
// (gguf/quants.py), run as an offline oracle by tools/reference/make_quant_golden.py
// (tests/data/quant/README.md has the command and the llama.cpp commit).
//
// gguf-py computes in float32 with numpy, one rounding per operation and in ggml's order
// (K-quants: dl = d * scale, then dl * q - dmin * min). A value must match bit for bit or within
// 1 ulp. The one other accepted difference is a fused multiply-add: an FMA-contracted d * q - m
// rounds once where numpy rounds twice, which near cancellation (d * q close to m) is more than
// an ulp of the small result yet never more than an ulp of the terms; so a value may also be
// within 1e-6 of the largest magnitude in its block.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/matmul.h"
#include "kernels/reference.h"
#include "test_util.h"

namespace bicache::kernels {
namespace {

using format::TensorType;

struct GoldenType {
  const char* name;
  TensorType type;
  size_t block_elems;
  size_t block_bytes;
};

const GoldenType kTypes[] = {
    {"Q4_0", TensorType::Q4_0, 32, 18},     {"Q4_1", TensorType::Q4_1, 32, 20},
    {"Q5_0", TensorType::Q5_0, 32, 22},     {"Q5_1", TensorType::Q5_1, 32, 24},
    {"Q8_0", TensorType::Q8_0, 32, 34},     {"Q2_K", TensorType::Q2_K, 256, 84},
    {"Q3_K", TensorType::Q3_K, 256, 110},   {"Q4_K", TensorType::Q4_K, 256, 144},
    {"Q5_K", TensorType::Q5_K, 256, 176},   {"Q6_K", TensorType::Q6_K, 256, 210},
    {"IQ4_NL", TensorType::IQ4_NL, 32, 18}, {"IQ4_XS", TensorType::IQ4_XS, 256, 136},
};
constexpr size_t kValues = 512;

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

int64_t UlpDistance(float a, float b) {
  int32_t ia, ib;
  std::memcpy(&ia, &a, 4);
  std::memcpy(&ib, &b, 4);
  // Map the sign-magnitude bit patterns onto a monotonic integer line (+0 and -0 coincide).
  const int64_t la = ia < 0 ? -static_cast<int64_t>(ia & 0x7fffffff) : ia;
  const int64_t lb = ib < 0 ? -static_cast<int64_t>(ib & 0x7fffffff) : ib;
  return la > lb ? la - lb : lb - la;
}

// Compares got with want; returns the number of values that were not bit-exact (each failing
// value is reported by gtest).
int Compare(const GoldenType& t, const char* what, const std::vector<float>& got,
            const std::vector<float>& want) {
  int inexact = 0;
  int failures = 0;
  for (size_t b = 0; b < want.size() / t.block_elems; ++b) {
    float block_max = 0.0f;
    for (size_t j = 0; j < t.block_elems; ++j)
      block_max = std::max(block_max, std::fabs(want[b * t.block_elems + j]));
    for (size_t j = 0; j < t.block_elems; ++j) {
      const size_t i = b * t.block_elems + j;
      if (std::memcmp(&got[i], &want[i], 4) == 0) continue;
      ++inexact;
      const bool ok = std::isfinite(got[i]) && (UlpDistance(got[i], want[i]) <= 1 ||
                                                std::fabs(got[i] - want[i]) <= 1e-6f * block_max);
      if (!ok && ++failures <= 8)
        ADD_FAILURE() << t.name << " " << what << ": value " << i << " (block " << b << ") got "
                      << got[i] << " want " << want[i];
    }
  }
  EXPECT_LE(failures, 0) << t.name << " " << what << ": " << failures << " values off";
  return inexact;
}

class DequantGolden : public ::testing::TestWithParam<GoldenType> {};

TEST_P(DequantGolden, MatchesGgufPy) {
  const GoldenType& t = GetParam();
  const std::vector<uint8_t> blocks =
      ReadBytes(testing::DataPath(std::string("quant/") + t.name + ".blocks"));
  const std::vector<float> want =
      testing::ReadF32File(testing::DataPath(std::string("quant/") + t.name + ".f32"));
  ASSERT_EQ(want.size(), kValues) << t.name;
  ASSERT_EQ(blocks.size(), kValues / t.block_elems * t.block_bytes) << t.name;
  uint64_t be = 0, bb = 0;
  ASSERT_TRUE(format::TensorTypeLayout(t.type, &be, &bb)) << t.name;
  EXPECT_EQ(be, t.block_elems);
  EXPECT_EQ(bb, t.block_bytes);

  // The whole row at once, scalar and dispatched.
  std::vector<float> got(kValues, NAN);
  ref::DequantizeRow(t.type, blocks.data(), got.data(), kValues);
  const int ref_inexact = Compare(t, "ref, whole row", got, want);
  std::fill(got.begin(), got.end(), NAN);
  DequantizeRow(t.type, blocks.data(), got.data(), kValues);
  const int simd_inexact = Compare(t, "dispatched, whole row", got, want);
  if (ref_inexact + simd_inexact > 0)
    std::printf(
        "[   INFO   ] %s: %d (ref) / %d (dispatched) of %zu values within tolerance, "
        "not bit-exact\n",
        t.name, ref_inexact, simd_inexact, kValues);

  // Block by block from an odd address (GGUF tensor data is only 32-byte aligned as a whole;
  // a row of a type with odd block bytes starts anywhere).
  std::vector<uint8_t> shifted(blocks.size() + 1);
  std::memcpy(shifted.data() + 1, blocks.data(), blocks.size());
  std::fill(got.begin(), got.end(), NAN);
  for (size_t b = 0; b < kValues / t.block_elems; ++b)
    DequantizeRow(t.type, shifted.data() + 1 + b * t.block_bytes, got.data() + b * t.block_elems,
                  t.block_elems);
  Compare(t, "dispatched, block by block, unaligned", got, want);
  std::fill(got.begin(), got.end(), NAN);
  ref::DequantizeRow(t.type, shifted.data() + 1, got.data(), kValues);
  Compare(t, "ref, unaligned", got, want);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, DequantGolden, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GoldenType>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace bicache::kernels
