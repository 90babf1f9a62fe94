// Linear (oneDNN matmul, bf16 or f32: kernels::ActiveMatmulPrecision) against a double-precision
// reference on bf16-rounded inputs, and DequantizeRow on hand-built blocks with known values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "format/gguf.h"
#include "kernels/int8_gemm.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/reference.h"
#include "test_util.h"
#include "util/error.h"

namespace bicache::kernels {
namespace {

using format::TensorType;

std::vector<float> Random(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::vector<float> Bf16Rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = ref::F32FromBf16(ref::Bf16FromF32(v[i]));
  return r;
}

// Checks y = x * W^T against the double reference on bf16-rounded x and W. The bound scales
// with sum_i |x_i w_i|, the size of the terms oneDNN adds in float.
void ExpectMatchesReference(const Linear& lin, const std::vector<float>& w_f32, size_t n,
                            uint32_t seed) {
  const size_t in = lin.in(), out = lin.out();
  const auto x = Random(n * in, seed);
  std::vector<float> y(n * out, -7.0f), want(n * out);
  lin.Forward(x.data(), n, y.data());
  const auto xr = Bf16Rounded(x), wr = Bf16Rounded(w_f32);
  ref::MatMulNT(xr.data(), wr.data(), want.data(), n, in, out);
  for (size_t r = 0; r < n; ++r) {
    for (size_t o = 0; o < out; ++o) {
      double mag = 0;
      for (size_t i = 0; i < in; ++i) mag += std::fabs(xr[r * in + i] * wr[o * in + i]);
      ASSERT_NEAR(y[r * out + o], want[r * out + o], 1e-3 * mag + 1e-6)
          << "n=" << n << " in=" << in << " out=" << out << " at [" << r << ", " << o << "]";
    }
  }
}

uint16_t HalfBits(float x) {  // exact for the small dyadic values used below
  if (x == 0) return 0;
  const uint16_t sign = x < 0 ? 0x8000 : 0;
  int e;
  const float m = std::frexp(std::fabs(x), &e);  // |x| = m * 2^e, m in [0.5, 1)
  const auto mant = static_cast<uint16_t>(std::lround((m * 2 - 1) * 1024));
  return static_cast<uint16_t>(sign | ((e - 1 + 15) << 10) | mant);
}

void PutHalf(std::vector<uint8_t>& buf, float x) {
  const uint16_t h = HalfBits(x);
  buf.push_back(static_cast<uint8_t>(h & 0xFF));
  buf.push_back(static_cast<uint8_t>(h >> 8));
}

using bicache::testing::ExpectError;
using bicache::testing::MakeMatrixTensor;

// ---- dequantisation ---------------------------------------------------------------------------

TEST(KernelsMatmul, DequantizeQ8_0KnownValues) {
  // Two blocks: d = 0.5 with q = j - 16, then d = -0.25 with q = 127 - 8j (covers +-127, -121).
  std::vector<uint8_t> buf = {0xAA};  // one leading byte so the blocks start unaligned
  PutHalf(buf, 0.5f);
  for (int j = 0; j < 32; ++j) buf.push_back(static_cast<uint8_t>(static_cast<int8_t>(j - 16)));
  PutHalf(buf, -0.25f);
  for (int j = 0; j < 32; ++j)
    buf.push_back(static_cast<uint8_t>(static_cast<int8_t>(127 - 8 * j)));
  std::vector<float> got(64), want(64);
  DequantizeRow(TensorType::Q8_0, buf.data() + 1, got.data(), 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(got[j], 0.5f * (j - 16)) << j;
    EXPECT_EQ(got[32 + j], -0.25f * (127 - 8 * j)) << j;
  }
  ref::DequantizeRow(TensorType::Q8_0, buf.data() + 1, want.data(), 64);
  EXPECT_EQ(got, want);
}

TEST(KernelsMatmul, DequantizeQ4_0KnownValues) {
  // d = 2: byte j holds low nibble j%16 (element j) and high nibble 15-j%16 (element j+16).
  std::vector<uint8_t> buf;
  PutHalf(buf, 2.0f);
  for (int j = 0; j < 16; ++j) buf.push_back(static_cast<uint8_t>((j & 0xF) | ((15 - j) << 4)));
  PutHalf(buf, -0.125f);
  for (int j = 0; j < 16; ++j) buf.push_back(0x8F);  // low 15 -> 7, high 8 -> 0
  std::vector<float> got(64);
  DequantizeRow(TensorType::Q4_0, buf.data(), got.data(), 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(got[j], 2.0f * (j - 8)) << j;
    EXPECT_EQ(got[j + 16], 2.0f * (15 - j - 8)) << j;
    EXPECT_EQ(got[32 + j], -0.125f * 7) << j;
    EXPECT_EQ(got[48 + j], 0.0f) << j;
  }
}

TEST(KernelsMatmul, DequantizeFloatTypes) {
  const std::vector<float> vals = {1.0f, -2.5f, 0.0f, 65504.0f, 0.375f, -0.0009765625f, 3.0f};
  std::vector<uint8_t> f16, bf16(2 * vals.size() + 1), f32(4 * vals.size());
  f16.push_back(0);  // unaligned start
  for (float v : vals) PutHalf(f16, v);
  for (size_t i = 0; i < vals.size(); ++i) {
    const uint16_t b = ref::Bf16FromF32(vals[i]);
    std::memcpy(&bf16[1 + 2 * i], &b, 2);
  }
  std::memcpy(f32.data(), vals.data(), f32.size());
  std::vector<float> got(vals.size());
  DequantizeRow(TensorType::F16, f16.data() + 1, got.data(), vals.size());
  EXPECT_EQ(got, vals);
  DequantizeRow(TensorType::BF16, bf16.data() + 1, got.data(), vals.size());
  for (size_t i = 0; i < vals.size(); ++i) EXPECT_EQ(got[i], Bf16Rounded({vals[i]})[0]);
  DequantizeRow(TensorType::F32, f32.data(), got.data(), vals.size());
  EXPECT_EQ(got, vals);
}

TEST(KernelsMatmul, DequantizeRejectsBadInput) {
  std::vector<uint8_t> buf(64, 0);
  std::vector<float> out(64);
  ExpectError([&] { DequantizeRow(TensorType::Q8_K, buf.data(), out.data(), 32); },
              ErrorKind::kUnsupported);
  ExpectError([&] { DequantizeRow(TensorType::Q8_0, buf.data(), out.data(), 31); },
              ErrorKind::kInvalidArgument);
  // a K-quant super-block holds 256 values
  ExpectError([&] { DequantizeRow(TensorType::Q4_K, buf.data(), out.data(), 32); },
              ErrorKind::kInvalidArgument);
}

// ---- Linear ---------------------------------------------------------------------------------

TEST(KernelsMatmul, LinearFromF32MatchesReference) {
  // n = 63 and 64 sit either side of the switch between the run-time-M and fixed-M primitives.
  const std::pair<size_t, size_t> shapes[] = {{33, 17}, {256, 130}, {1024, 96}};  // {in, out}
  for (auto [in, out] : shapes) {
    const auto w = Random(out * in, static_cast<uint32_t>(in + out));
    const Linear lin = Linear::FromF32(w.data(), out, in);
    EXPECT_EQ(lin.in(), in);
    EXPECT_EQ(lin.out(), out);
    for (size_t n : {1, 3, 63, 64, 200})
      ExpectMatchesReference(lin, w, n, static_cast<uint32_t>(n));
  }
}

TEST(KernelsMatmul, LinearRepeatedShapesGiveSameResult) {
  // The second call hits the primitive cache; results must be bit-identical.
  const size_t in = 96, out = 40, n = 5;
  const auto w = Random(out * in, 3), x = Random(n * in, 4);
  const Linear lin = Linear::FromF32(w.data(), out, in);
  std::vector<float> a(n * out), b(n * out);
  lin.Forward(x.data(), n, a.data());
  lin.Forward(x.data(), n, b.data());
  EXPECT_EQ(a, b);
}

TEST(KernelsMatmul, LinearFromTensorAllTypesAgree) {
  const size_t in = 64, out = 6, n = 3;
  // Weights d*q with d = 0.25 and small integer q are exact in every storage type.
  std::vector<float> w(out * in);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * (static_cast<int>(i * 7 % 15) - 7);
  std::vector<uint8_t> f32(w.size() * 4), f16, bf16(w.size() * 2), q8, q4;
  std::memcpy(f32.data(), w.data(), f32.size());
  for (size_t i = 0; i < w.size(); ++i) {
    PutHalf(f16, w[i]);
    const uint16_t b = ref::Bf16FromF32(w[i]);
    std::memcpy(&bf16[2 * i], &b, 2);
  }
  for (size_t blk = 0; blk < w.size() / 32; ++blk) {
    PutHalf(q8, 0.25f);
    for (size_t j = 0; j < 32; ++j) {
      q8.push_back(static_cast<uint8_t>(static_cast<int8_t>(std::lround(w[blk * 32 + j] * 4))));
    }
    PutHalf(q4, 0.25f);
    for (size_t j = 0; j < 16; ++j) {
      const auto lo = static_cast<uint8_t>(std::lround(w[blk * 32 + j] * 4) + 8);
      const auto hi = static_cast<uint8_t>(std::lround(w[blk * 32 + j + 16] * 4) + 8);
      q4.push_back(static_cast<uint8_t>(lo | (hi << 4)));
    }
  }
  const auto x = Random(n * in, 9);
  std::vector<float> want(n * out);
  Linear::FromF32(w.data(), out, in).Forward(x.data(), n, want.data());
  const std::pair<TensorType, const std::vector<uint8_t>*> cases[] = {{TensorType::F32, &f32},
                                                                      {TensorType::F16, &f16},
                                                                      {TensorType::BF16, &bf16},
                                                                      {TensorType::Q8_0, &q8},
                                                                      {TensorType::Q4_0, &q4}};
  for (auto [type, bytes] : cases) {
    const Linear lin = Linear::FromTensor(MakeMatrixTensor(type, in, out, *bytes));
    ASSERT_EQ(lin.in(), in);
    ASSERT_EQ(lin.out(), out);
    std::vector<float> y(n * out);
    lin.Forward(x.data(), n, y.data());
    if (type == TensorType::Q8_0 && Int8RouteAvailable()) {
      // Q8_0 takes the int8 route (activations rounded to 8 bits per block): its own twin.
      std::vector<float> twin(n * out);
      ref::Q8_0ProductInt8(x.data(), n, in, q8.data(), in / 32 * 34, out, twin.data());
      for (size_t i = 0; i < y.size(); ++i)
        EXPECT_NEAR(y[i], twin[i], 1e-5f * (1.0f + std::fabs(twin[i]))) << i;
      continue;
    }
    EXPECT_EQ(y, want) << "type " << static_cast<int>(type);
  }
}

TEST(KernelsMatmul, LinearFromTensorRejectsBadTensors) {
  std::vector<uint8_t> bytes(4096, 0);
  ExpectError([&] { Linear::FromTensor(MakeMatrixTensor(TensorType::Q8_K, 256, 2, bytes)); },
              ErrorKind::kUnsupported);
  ExpectError([&] { Linear::FromTensor(MakeMatrixTensor(TensorType::Q8_0, 48, 2, bytes)); },
              ErrorKind::kModel);
  // rows of 128 are half a K-quant super-block
  ExpectError([&] { Linear::FromTensor(MakeMatrixTensor(TensorType::Q4_K, 128, 2, bytes)); },
              ErrorKind::kModel);
  ExpectError(
      [&] {
        auto t = MakeMatrixTensor(TensorType::F32, 8, 2, bytes);
        t.ne = {8, 2, 3};  // a stack of matrices, not one
        Linear::FromTensor(t);
      },
      ErrorKind::kModel);
  ExpectError(
      [&] {
        auto t = MakeMatrixTensor(TensorType::F32, 64, 64, bytes);  // needs 16384 bytes, has 4096
        Linear::FromTensor(t);
      },
      ErrorKind::kModel);
  ExpectError([&] { Linear::FromF32(nullptr, 0, 4); }, ErrorKind::kInvalidArgument);
}

TEST(KernelsMatmul, LinearEmptyAndMoved) {
  Linear empty;
  EXPECT_EQ(empty.in(), 0u);
  std::vector<float> x(4), y(4);
  ExpectError([&] { empty.Forward(x.data(), 1, y.data()); }, ErrorKind::kInternal);

  const std::vector<float> w = {1, 2, 3, 4, 5, 6};  // [out=2, in=3]
  Linear a = Linear::FromF32(w.data(), 2, 3);
  Linear b = std::move(a);
  const float in[3] = {1, 0, -1};
  float out[2];
  b.Forward(in, 1, out);
  EXPECT_EQ(out[0], -2.0f);
  EXPECT_EQ(out[1], -2.0f);
  b.Forward(in, 0, out);  // n = 0 is a no-op
}

TEST(KernelsMatmul, LinearConcurrentCallsAgree) {
  const size_t in = 128, out = 64, n = 17;
  const auto w = Random(out * in, 5), x = Random(n * in, 6);
  const Linear lin = Linear::FromF32(w.data(), out, in);
  std::vector<float> want(n * out);
  lin.Forward(x.data(), n, want.data());
  std::vector<std::vector<float>> got(4, std::vector<float>(n * out));
  std::vector<std::thread> threads;
  for (auto& g : got) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 5; ++rep) lin.Forward(x.data(), n, g.data());
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& g : got) EXPECT_EQ(g, want);
}

// BICACHE_MATMUL picks the matmul precision: auto (or unset) takes bf16 exactly where oneDNN has a
// bf16 kernel for this CPU; other values are refused by name. ctest runs the kernel and model tests
// a second time under BICACHE_MATMUL=f32 (CMakeLists.txt), so both paths meet the same references.
TEST(KernelsMatmul, PrecisionOverrideParses) {
  EXPECT_EQ(ParseMatmulPrecision(""), std::nullopt);
  EXPECT_EQ(ParseMatmulPrecision("auto"), std::nullopt);
  EXPECT_EQ(ParseMatmulPrecision("bf16"), MatmulPrecision::kBf16);
  EXPECT_EQ(ParseMatmulPrecision("f32"), MatmulPrecision::kF32);
  for (const char* bad : {"fp32", "BF16", "f16", " f32"}) {
    try {
      ParseMatmulPrecision(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
}

TEST(KernelsMatmul, ActivePrecisionFollowsOverrideOrProbe) {
  const char* env = std::getenv("BICACHE_MATMUL");
  const auto forced = ParseMatmulPrecision(env == nullptr ? "" : env);
  const auto want =
      forced ? *forced : (Bf16MatmulAvailable() ? MatmulPrecision::kBf16 : MatmulPrecision::kF32);
  EXPECT_EQ(ActiveMatmulPrecision(), want) << "BICACHE_MATMUL=" << (env ? env : "(unset)");
  EXPECT_STREQ(MatmulPrecisionName(MatmulPrecision::kF32), "f32");
  EXPECT_STREQ(MatmulPrecisionName(MatmulPrecision::kBf16), "bf16");
}

TEST(KernelsMatmul, GemmYardstickRuns) {
  EXPECT_GT(MeasureGemmGflops(64, 48, 32, 2), 0.0);
  ExpectError([] { MeasureGemmGflops(0, 8, 8, 1); }, ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace bicache::kernels
