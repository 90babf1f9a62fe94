// The few-row integer kernels (kernels/few_rows.h) on every instruction set this CPU runs (AVX2,
// AVX512-VNNI), for every type they take: the scalar twin's decoders (ref::DecodeIntSuperblock)
// against the reference dequantization, each compiled kernel against the twin
// (ref::FewRowsProduct), the twin against the exact float product within what 8-bit activations
// can move it, Linear taking the route, the route table (kernels/linear_route.h) and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
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

using bicache::testing::RandomRows;

using format::TensorType;

struct TypeCase {
  TensorType type;
  std::vector<size_t> halves;  // byte offsets of f16 fields within one block
};

const TypeCase kTypes[] = {
    {TensorType::Q4_0, {0}},    {TensorType::Q4_1, {0, 2}}, {TensorType::Q5_0, {0}},
    {TensorType::Q5_1, {0, 2}}, {TensorType::Q8_0, {0}},    {TensorType::Q2_K, {80, 82}},
    {TensorType::Q3_K, {108}},  {TensorType::Q4_K, {0, 2}}, {TensorType::Q5_K, {0, 2}},
    {TensorType::Q6_K, {208}},  {TensorType::IQ4_NL, {0}},  {TensorType::IQ4_XS, {0}},
};

size_t RowBytes(TensorType type, size_t in) {
  uint64_t elems = 0, bytes = 0;
  format::TensorTypeLayout(type, &elems, &bytes);
  return in / elems * bytes;
}

// out rows of `in` values: random bytes (every quant pattern) with f16 fields +-[2^-9, 2^-2).
std::vector<uint8_t> RandomWeights(const TypeCase& tc, size_t out, size_t in, uint32_t seed) {
  uint64_t elems = 0, bytes = 0;
  format::TensorTypeLayout(tc.type, &elems, &bytes);
  std::mt19937 rng(seed);
  std::vector<uint8_t> w(out * in / elems * bytes);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  for (size_t blk = 0; blk < w.size() / bytes; ++blk) {
    for (size_t off : tc.halves) {
      const auto h =
          static_cast<uint16_t>((rng() & 0x8000) | ((6 + rng() % 8) << 10) | (rng() & 0x3FF));
      std::memcpy(&w[blk * bytes + off], &h, 2);
    }
  }
  return w;
}

std::vector<IntIsa> CompiledIsas() {
  std::vector<IntIsa> v;
  if (CpuIntIsa() >= IntIsa::kAvx2) v.push_back(IntIsa::kAvx2);
  if (CpuIntIsa() >= IntIsa::kAvx512Vnni) v.push_back(IntIsa::kAvx512Vnni);
  return v;
}

// sum_i (|a v_i| + |b|) |x_i| for y[r, o]: the size of the terms the kernels add, which bounds
// their float rounding.
double TermMagnitude(TensorType type, const float* xr, const uint8_t* row, size_t in) {
  const size_t super_bytes = RowBytes(type, 256);
  int v[256];
  float a[16], b[16];
  double mag = 0;
  for (size_t sb = 0; sb < in / 256; ++sb) {
    const int sub = ref::DecodeIntSuperblock(type, row + sb * super_bytes, v, a, b);
    for (int i = 0; i < 256; ++i) {
      mag += (std::fabs(static_cast<double>(a[i / sub]) * v[i]) + std::fabs(b[i / sub])) *
             std::fabs(xr[sb * 256 + i]);
    }
  }
  return mag;
}

TEST(KernelsFewRows, TwinDecodersMatchDequantization) {
  for (const TypeCase& tc : kTypes) {
    SCOPED_TRACE(format::TensorTypeName(tc.type));
    const size_t in = 512;
    const auto w = RandomWeights(tc, 1, in, 7);
    std::vector<float> deq(in);
    ref::DequantizeRow(tc.type, w.data(), deq.data(), in);
    const size_t super_bytes = RowBytes(tc.type, 256);
    for (size_t sb = 0; sb < in / 256; ++sb) {
      int v[256];
      float a[16], b[16];
      const int sub = ref::DecodeIntSuperblock(tc.type, w.data() + sb * super_bytes, v, a, b);
      ASSERT_TRUE(sub == 16 || sub == 32) << sub;
      for (int i = 0; i < 256; ++i) {
        const float want = deq[sb * 256 + i];
        const float got = a[i / sub] * static_cast<float>(v[i]) - b[i / sub];
        ASSERT_NEAR(got, want, 1e-6f * (std::fabs(want) + std::fabs(b[i / sub])))
            << "superblock " << sb << " value " << i;
      }
    }
  }
}

TEST(KernelsFewRows, EveryIsaMatchesTheTwin) {
  const auto isas = CompiledIsas();
  if (isas.empty()) GTEST_SKIP() << "this CPU has no AVX2: the few-row route never runs here";
  const size_t in = 512, out = 37;  // out: ragged per-thread ranges
  for (const TypeCase& tc : kTypes) {
    const auto w = RandomWeights(tc, out, in, 11);
    const size_t row_bytes = RowBytes(tc.type, in);
    for (size_t n : {1, 3, 8, 20}) {
      auto x = RandomRows(n, in, static_cast<uint32_t>(n + 100));
      // A zero superblock of activations (scale 0, per 256 and per 32) in the last row.
      std::fill(x.end() - 256, x.end(), 0.0f);
      std::vector<float> twin(n * out);
      ref::FewRowsProduct(tc.type, x.data(), n, in, w.data(), row_bytes, out, twin.data());
      for (IntIsa isa : isas) {
        SCOPED_TRACE(format::TensorTypeName(tc.type) + " n=" + std::to_string(n) + " " +
                     IntIsaName(isa));
        std::vector<float> got(n * out, -1.0f);
        FewRowsForward(isa, tc.type, x.data(), n, in, w.data(), row_bytes, out, got.data());
        for (size_t r = 0; r < n; ++r) {
          for (size_t o = 0; o < out; ++o) {
            const double mag =
                TermMagnitude(tc.type, x.data() + r * in, w.data() + o * row_bytes, in);
            ASSERT_NEAR(got[r * out + o], twin[r * out + o], 1e-5 * mag + 1e-7)
                << "[" << r << ", " << o << "]";
          }
        }
      }
    }
  }
}

TEST(KernelsFewRows, TwinIsTheExactProductWithinActivationRounding) {
  const size_t in = 256, out = 9, n = 4;
  for (const TypeCase& tc : kTypes) {
    SCOPED_TRACE(format::TensorTypeName(tc.type));
    const auto w = RandomWeights(tc, out, in, 5);
    const size_t row_bytes = RowBytes(tc.type, in);
    std::vector<float> wf(out * in);
    ref::DequantizeRow(tc.type, w.data(), wf.data(), out * in);
    const auto x = RandomRows(n, in, 6);
    std::vector<float> twin(n * out);
    ref::FewRowsProduct(tc.type, x.data(), n, in, w.data(), row_bytes, out, twin.data());
    const size_t block = FewRowsPer256(tc.type) ? 256 : 32;  // the activations' scale block
    for (size_t r = 0; r < n; ++r) {
      for (size_t o = 0; o < out; ++o) {
        double exact = 0, rounding = 0;  // |x - dx q| <= amax / 254 per value
        for (size_t kb = 0; kb < in / block; ++kb) {
          float amax = 0;
          double wsum = 0;
          for (size_t j = 0; j < block; ++j) {
            const size_t i = kb * block + j;
            amax = std::fmax(amax, std::fabs(x[r * in + i]));
            wsum += std::fabs(wf[o * in + i]);
            exact += static_cast<double>(x[r * in + i]) * wf[o * in + i];
          }
          rounding += wsum * amax / 254.0;
        }
        ASSERT_NEAR(twin[r * out + o], exact, rounding * 1.001 + 1e-6 * std::fabs(exact))
            << "[" << r << ", " << o << "]";
      }
    }
  }
}

TEST(KernelsFewRows, LinearTakesTheRouteForFewRows) {
  if (ActiveIntIsa() == IntIsa::kNone) GTEST_SKIP() << "integer routes off or no AVX2 here";
  const size_t in = 256, out = 24;
  for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K, TensorType::Q8_0}) {
    SCOPED_TRACE(format::TensorTypeName(type));
    const TypeCase* tc = nullptr;
    for (const TypeCase& c : kTypes)
      if (c.type == type) tc = &c;
    const auto w = RandomWeights(*tc, out, in, 3);
    const Linear lin = Linear::FromTensor(bicache::testing::MakeMatrixTensor(type, in, out, w));
    const size_t n = FewRowsCutover(type, ActiveIntIsa(), ActiveMatmulPrecision());
    if (n == 0) GTEST_SKIP() << "BICACHE_FEW_ROWS=0";
    const auto x = RandomRows(n, in, 4);
    std::vector<float> got(n * out), twin(n * out);
    lin.Forward(x.data(), n, got.data());
    ref::FewRowsProduct(type, x.data(), n, in, w.data(), RowBytes(type, in), out, twin.data());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], twin[i], 1e-4f * (1.0f + std::fabs(twin[i]))) << i;
  }
}

// bf16 W, activations rounded to bf16: products exact in float, so only the summation order differs
// from the double-precision sum.
TEST(KernelsFewRows, Bf16KernelsMatchTheExactProduct) {
  const size_t in = 320, out = 29;
  std::mt19937 rng(9);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint16_t> w(out * in);
  std::vector<float> wf(out * in);
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = ref::Bf16FromF32(dist(rng));
    wf[i] = ref::F32FromBf16(w[i]);
  }
  for (IntIsa isa : CompiledIsas()) {
    if (!FewRowsBf16Available(isa)) continue;
    for (size_t n : {1, 5, 8, 19}) {
      SCOPED_TRACE(std::string(IntIsaName(isa)) + " n=" + std::to_string(n));
      std::vector<uint16_t> xb(n * in);
      std::vector<float> xf(n * in);
      for (size_t i = 0; i < xb.size(); ++i) {
        xb[i] = ref::Bf16FromF32(dist(rng));
        xf[i] = ref::F32FromBf16(xb[i]);
      }
      std::vector<float> got(n * out, -1.0f), want(n * out);
      FewRowsBf16Forward(isa, xb.data(), xf.data(), n, in, w.data(), out, got.data());
      ref::MatMulNT(xf.data(), wf.data(), want.data(), n, in, out);
      for (size_t r = 0; r < n; ++r) {
        for (size_t o = 0; o < out; ++o) {
          double mag = 0;
          for (size_t i = 0; i < in; ++i) mag += std::fabs(xf[r * in + i] * wf[o * in + i]);
          ASSERT_NEAR(got[r * out + o], want[r * out + o], 1e-5 * mag) << r << ", " << o;
        }
      }
    }
  }
  if (CpuIntIsa() != IntIsa::kNone) {
    std::vector<float> y(out);
    EXPECT_THROW(
        FewRowsBf16Forward(IntIsa::kAvx2, nullptr, nullptr, 1, in, w.data(), out, y.data()),
        Error);  // no activations
    EXPECT_THROW(
        FewRowsBf16Forward(IntIsa::kNone, nullptr, nullptr, 1, in, w.data(), out, y.data()), Error);
  }
}

TEST(KernelsFewRows, LinearTakesTheBf16RouteForFewRows) {
  const size_t in = 256, out = 24;
  const size_t n = FewRowsCutover(TensorType::BF16, ActiveIntIsa(), ActiveMatmulPrecision());
  if (n == 0) GTEST_SKIP() << "few-row routes off or no AVX2 here";
  std::mt19937 rng(12);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  std::vector<uint8_t> bytes(out * in * 2);
  std::vector<float> wf(out * in);
  for (size_t i = 0; i < wf.size(); ++i) {
    const uint16_t h = ref::Bf16FromF32(dist(rng));
    std::memcpy(&bytes[2 * i], &h, 2);
    wf[i] = ref::F32FromBf16(h);
  }
  const Linear lin =
      Linear::FromTensor(bicache::testing::MakeMatrixTensor(TensorType::BF16, in, out, bytes));
  ASSERT_EQ(ChooseLinearRoute(TensorType::BF16, ActiveMatmulPrecision() == MatmulPrecision::kF32, n,
                              in, ActiveMatmulPrecision(), ActiveIntIsa()),
            LinearRoute::kFewRows);
  auto x = RandomRows(n, in, 13);
  for (auto& v : x) v = ref::F32FromBf16(ref::Bf16FromF32(v));
  std::vector<float> got(n * out), want(n * out);
  lin.Forward(x.data(), n, got.data());
  ref::MatMulNT(x.data(), wf.data(), want.data(), n, in, out);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::fabs(want[i]))) << i;
}

TEST(KernelsFewRows, RouteTable) {
  using R = LinearRoute;
  const auto bf16 = MatmulPrecision::kBf16, f32 = MatmulPrecision::kF32;
  const auto vnni = IntIsa::kAvx512Vnni, avx2 = IntIsa::kAvx2, none = IntIsa::kNone;
  const size_t few = FewRowsCutover(TensorType::Q4_K, vnni, bf16);
  if (few == 0) GTEST_SKIP() << "BICACHE_FEW_ROWS=0";
  EXPECT_EQ(ChooseLinearRoute(TensorType::BF16, false, 256, 4096, bf16, vnni), R::kGemm);
  EXPECT_EQ(ChooseLinearRoute(TensorType::BF16, true, 256, 4096, f32, avx2), R::kPanels);
  EXPECT_EQ(ChooseLinearRoute(TensorType::BF16, false, 1, 4096, f32, avx2), R::kGemm);  // F32 file
  EXPECT_EQ(ChooseLinearRoute(TensorType::BF16, false, 1, 4096, bf16, none), R::kGemm);
  EXPECT_EQ(ChooseLinearRoute(TensorType::BF16, true, 1, 4096, f32, none), R::kPanels);
  if (FewRowsCutover(TensorType::BF16, avx2, f32) >= 1) {
    EXPECT_EQ(ChooseLinearRoute(TensorType::BF16, true, 1, 4096, f32, avx2), R::kFewRows);
  }
  if (FewRowsCutover(TensorType::BF16, vnni, bf16) >= 1) {
    EXPECT_EQ(ChooseLinearRoute(TensorType::BF16, false, 1, 4096, bf16, vnni), R::kFewRows);
    EXPECT_EQ(ChooseLinearRoute(TensorType::BF16, false, 1, 4080, bf16, vnni), R::kGemm);  // % 32
  }
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_K, true, few, 4096, bf16, vnni), R::kFewRows);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_K, true, 256, 4096, bf16, vnni), R::kKQuantTile);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q6_K, true, 256, 4096, f32, avx2), R::kKQuantTile);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q2_K, true, 256, 4096, bf16, avx2), R::kKQuantTile);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_0, true, 256, 4096, bf16, vnni), R::kPanels);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_K, true, 256, 4096, bf16, none), R::kPanels);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q8_0, true, 256, 4096, bf16, vnni), R::kInt8Tile);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q8_0, true, 256, 4096, f32, avx2), R::kPanels);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q6_K, true, 1, 4096, f32, avx2), R::kFewRows);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_K, true, 1, 4096, bf16, none), R::kPanels);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q8_0, true, 1, 4096, bf16, none), R::kPanels);
  EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_0, true, 1, 96, bf16, vnni), R::kPanels);  // in % 256
  EXPECT_EQ(FewRowsCutover(TensorType::Q4_K, none, bf16), 0u);
  EXPECT_EQ(FewRowsCutover(TensorType::F16, vnni, bf16), 0u);
  EXPECT_EQ(FewRowsCutover(TensorType::BF16, none, bf16), 0u);
  if (!ParseFewRowsOverride(std::getenv("BICACHE_FEW_ROWS") ? std::getenv("BICACHE_FEW_ROWS")
                                                            : "")) {
    // The measured table (linear_route.h).
    EXPECT_EQ(FewRowsCutover(TensorType::Q8_0, vnni, bf16), 8u);
    EXPECT_EQ(FewRowsCutover(TensorType::Q8_0, avx2, bf16), 16u);
    EXPECT_EQ(FewRowsCutover(TensorType::Q4_K, vnni, bf16), 12u);  // then the K-quant tiles
    EXPECT_EQ(FewRowsCutover(TensorType::Q6_K, vnni, bf16), 12u);
    EXPECT_EQ(FewRowsCutover(TensorType::Q2_K, vnni, bf16), 12u);
    EXPECT_EQ(FewRowsCutover(TensorType::Q6_K, avx2, bf16), 16u);
    EXPECT_EQ(FewRowsCutover(TensorType::Q4_0, avx2, f32), 32u);
    EXPECT_EQ(FewRowsCutover(TensorType::Q4_0, vnni, bf16), 16u);
    EXPECT_EQ(FewRowsCutover(TensorType::Q4_K, avx2, bf16), 16u);
    EXPECT_EQ(FewRowsCutover(TensorType::Q4_K, avx2, f32), 16u);
    EXPECT_EQ(FewRowsCutover(TensorType::BF16, vnni, bf16), 0u);
    EXPECT_EQ(FewRowsCutover(TensorType::BF16, avx2, f32), 16u);
    EXPECT_EQ(ChooseLinearRoute(TensorType::Q8_0, true, 9, 4096, bf16, vnni), R::kInt8Tile);
    EXPECT_EQ(ChooseLinearRoute(TensorType::Q8_0, true, 9, 4096, bf16, avx2), R::kFewRows);
    EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_K, true, 12, 4096, bf16, vnni), R::kFewRows);
    EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_K, true, 13, 4096, bf16, vnni), R::kKQuantTile);
    EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_K, true, 16, 4096, f32, avx2), R::kFewRows);
    EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_K, true, 17, 4096, f32, avx2), R::kKQuantTile);
    EXPECT_EQ(ChooseLinearRoute(TensorType::Q4_0, true, 32, 4096, f32, avx2), R::kFewRows);
  }
}

TEST(KernelsFewRows, EnvironmentOverride) {
  EXPECT_FALSE(ParseIntIsaOverride("").has_value());
  EXPECT_FALSE(ParseIntIsaOverride("auto").has_value());
  EXPECT_EQ(ParseIntIsaOverride("0"), IntIsa::kNone);
  EXPECT_EQ(ParseIntIsaOverride("off"), IntIsa::kNone);
  EXPECT_EQ(ParseIntIsaOverride("avx2"), IntIsa::kAvx2);
  try {
    ParseIntIsaOverride("avx9");
    ADD_FAILURE() << "accepted avx9";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("BICACHE_INT8"), std::string::npos) << e.what();
  }
}

TEST(KernelsFewRows, CutoverOverride) {
  EXPECT_FALSE(ParseFewRowsOverride("").has_value());
  EXPECT_FALSE(ParseFewRowsOverride("auto").has_value());
  EXPECT_EQ(ParseFewRowsOverride("0"), 0u);
  EXPECT_EQ(ParseFewRowsOverride("16"), 16u);
  for (const char* bad : {"-1", "x", "16x", "65"}) {
    try {
      ParseFewRowsOverride(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("BICACHE_FEW_ROWS"), std::string::npos) << e.what();
    }
  }
}

TEST(KernelsFewRows, BadInputsAreErrors) {
  std::vector<float> x(64 * 512), y(64 * 4);
  std::vector<uint8_t> w(4 * RowBytes(TensorType::Q4_K, 512));
  const IntIsa isa = CpuIntIsa();
  if (isa == IntIsa::kNone) {
    EXPECT_THROW(FewRowsForward(IntIsa::kAvx2, TensorType::Q4_K, x.data(), 1, 512, w.data(),
                                RowBytes(TensorType::Q4_K, 512), 4, y.data()),
                 Error);
    return;
  }
  const size_t rb = RowBytes(TensorType::Q4_K, 512);
  EXPECT_THROW(
      FewRowsForward(IntIsa::kNone, TensorType::Q4_K, x.data(), 1, 512, w.data(), rb, 4, y.data()),
      Error);
  EXPECT_THROW(FewRowsForward(isa, TensorType::BF16, x.data(), 1, 512, w.data(), 1024, 4, y.data()),
               Error);  // no integer kernel for BF16
  EXPECT_THROW(
      FewRowsForward(isa, TensorType::Q4_K, x.data(), 1, 512, w.data(), rb + 1, 4, y.data()),
      Error);  // wrong row size
  EXPECT_THROW(FewRowsForward(isa, TensorType::Q4_K, x.data(), kFewRowsMax + 1, 512, w.data(), rb,
                              4, y.data()),
               Error);  // too many rows
  EXPECT_THROW(FewRowsForward(isa, TensorType::Q8_0, x.data(), 1, 96, w.data(), 102, 4, y.data()),
               Error);  // rows not whole superblocks
}

}  // namespace
}  // namespace bicache::kernels
