// float32 -> ggml block encoders (format/quantize.h): round trips through the reference decoder
// (kernels::ref::DequantizeRow, written from ggml's dequantize_row_*), hand-checked block bytes,
// element placement inside each block, bad row lengths, and GgufWriter::WriteStreamed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "format/gguf.h"
#include "format/quantize.h"
#include "kernels/reference.h"
#include "test_util.h"

namespace bicache::format {
namespace {

struct TypeBound {
  TensorType type;
  double max_rel_rms;  // bound on RMS(decoded - x) / RMS(x) for N(0, 1) rows
};

// Measured on these rows (seed 7, 64 x 1024 values, row 5 with outliers):
// Q8_0 0.0060, Q4_0 0.093, Q4_1 0.072, Q5_0 0.045, Q5_1 0.035, Q4_K 0.074, Q5_K 0.037, Q6_K 0.018.
// Bounds: 15-20% above (the encoders are deterministic).
const TypeBound kBounds[] = {
    {TensorType::Q8_0, 0.007}, {TensorType::Q4_0, 0.108}, {TensorType::Q4_1, 0.085},
    {TensorType::Q5_0, 0.053}, {TensorType::Q5_1, 0.042}, {TensorType::Q4_K, 0.087},
    {TensorType::Q5_K, 0.044}, {TensorType::Q6_K, 0.022},
};

size_t EncodedBytes(TensorType type, size_t n) {
  uint64_t be = 0, bb = 0;
  EXPECT_TRUE(TensorTypeLayout(type, &be, &bb));
  return n / be * bb;
}

std::vector<float> RoundTrip(TensorType type, const std::vector<float>& x) {
  std::vector<uint8_t> enc(EncodedBytes(type, x.size()));
  EncodeRow(type, x.data(), x.size(), enc.data());
  std::vector<float> y(x.size());
  kernels::ref::DequantizeRow(type, enc.data(), y.data(), x.size());
  return y;
}

TEST(FormatQuantize, RandomRowsDecodeCloseToInput) {
  const size_t rows = 64, cols = 1024;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);
  for (size_t i = 0; i < cols; i += 97) x[5 * cols + i] *= 20.0f;  // row 5: outliers
  for (const TypeBound& tb : kBounds) {
    const std::vector<float> y = RoundTrip(tb.type, x);
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (x[i] - y[i]) * (x[i] - y[i]);
      ref += x[i] * x[i];
      ASSERT_TRUE(std::isfinite(y[i])) << TensorTypeName(tb.type) << " element " << i;
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, tb.max_rel_rms) << TensorTypeName(tb.type);
    // EncodeTensor is the same encoder over the whole span.
    std::vector<uint8_t> a(EncodedBytes(tb.type, x.size()));
    EncodeRow(tb.type, x.data(), x.size(), a.data());
    EXPECT_EQ(EncodeTensor(tb.type, x), a) << TensorTypeName(tb.type);
  }
}

// A scaled row decodes to the scaled decode (to f16 precision): scales are relative.
TEST(FormatQuantize, SmallAndLargeMagnitudes) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(512);
  for (float& v : x) v = normal(rng);
  for (float scale : {1e-3f, 30.0f}) {
    std::vector<float> xs(x);
    for (float& v : xs) v *= scale;
    for (const TypeBound& tb : kBounds) {
      const std::vector<float> y = RoundTrip(tb.type, xs);
      double err = 0, ref = 0;
      for (size_t i = 0; i < xs.size(); ++i) {
        err += (xs[i] - y[i]) * (xs[i] - y[i]);
        ref += xs[i] * xs[i];
      }
      EXPECT_LT(std::sqrt(err / ref), tb.max_rel_rms * 1.3)
          << TensorTypeName(tb.type) << " scale " << scale;
    }
  }
}

TEST(FormatQuantize, ZeroRowBlockBytes) {
  const std::vector<float> zeros(256, 0.0f);
  for (const TypeBound& tb : kBounds) {
    const std::vector<float> y = RoundTrip(tb.type, zeros);
    for (float v : y) ASSERT_EQ(v, 0.0f) << TensorTypeName(tb.type);
  }
  std::vector<uint8_t> b(EncodedBytes(TensorType::Q4_K, 256));
  EncodeRow(TensorType::Q4_K, zeros.data(), 256, b.data());
  ASSERT_EQ(b.size(), 144u);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], 0) << "Q4_K byte " << i;

  b.assign(EncodedBytes(TensorType::Q5_K, 256), 0xff);
  EncodeRow(TensorType::Q5_K, zeros.data(), 256, b.data());
  ASSERT_EQ(b.size(), 176u);
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i], 0) << "Q5_K byte " << i;

  // Q6_K stores level 32 (= 0): low nibbles 0, high bits 2 in each 2-bit field, scales 0, d 0.
  b.assign(EncodedBytes(TensorType::Q6_K, 256), 0x55);
  EncodeRow(TensorType::Q6_K, zeros.data(), 256, b.data());
  ASSERT_EQ(b.size(), 210u);
  for (size_t i = 0; i < 128; ++i) EXPECT_EQ(b[i], 0x00) << "Q6_K ql " << i;
  for (size_t i = 128; i < 192; ++i) EXPECT_EQ(b[i], 0xAA) << "Q6_K qh " << i;
  for (size_t i = 192; i < 210; ++i) EXPECT_EQ(b[i], 0x00) << "Q6_K scales/d " << i;

  // Q5_0 stores level 16 (= 0): every qh bit set, nibbles 0.
  b.assign(EncodedBytes(TensorType::Q5_0, 32), 0x55);
  EncodeRow(TensorType::Q5_0, zeros.data(), 32, b.data());
  ASSERT_EQ(b.size(), 22u);
  EXPECT_EQ(HalfToFloat(static_cast<uint16_t>(b[0] | b[1] << 8)), 0.0f);
  for (size_t i = 2; i < 6; ++i) EXPECT_EQ(b[i], 0xff) << "Q5_0 qh " << i;
  for (size_t i = 6; i < 22; ++i) EXPECT_EQ(b[i], 0x00) << "Q5_0 qs " << i;
}

TEST(FormatQuantize, ConstantRows) {
  const std::vector<float> c(256, 0.75f);
  // Q4_1 / Q5_1 store a constant exactly in their f16 offset.
  for (TensorType t : {TensorType::Q4_1, TensorType::Q5_1}) {
    std::vector<uint8_t> b(EncodedBytes(t, 256));
    EncodeRow(t, c.data(), 256, b.data());
    EXPECT_EQ(HalfToFloat(static_cast<uint16_t>(b[0] | b[1] << 8)), 0.0f)
        << TensorTypeName(t);  // d
    EXPECT_EQ(HalfToFloat(static_cast<uint16_t>(b[2] | b[3] << 8)), 0.75f)
        << TensorTypeName(t);  // m
    for (float v : RoundTrip(t, c)) ASSERT_EQ(v, 0.75f) << TensorTypeName(t);
  }
  for (const TypeBound& tb : kBounds) {
    for (float v : RoundTrip(tb.type, c))
      ASSERT_NEAR(v, 0.75f, 0.75f * 2e-3f) << TensorTypeName(tb.type);
  }
  const std::vector<float> neg(256, -2.0f);
  for (const TypeBound& tb : kBounds) {
    for (float v : RoundTrip(tb.type, neg))
      ASSERT_NEAR(v, -2.0f, 2.0f * 2e-3f) << TensorTypeName(tb.type);
  }
}

// One non-zero value at every position of a 256-value row: it must come back at that position
// (and nowhere else), which checks where each type's layout puts each element.
TEST(FormatQuantize, EveryPositionLandsInPlace) {
  for (const TypeBound& tb : kBounds) {
    for (size_t k = 0; k < 256; ++k) {
      std::vector<float> x(256, 0.0f);
      x[k] = (k % 2) ? 1.5f : -1.5f;
      const std::vector<float> y = RoundTrip(tb.type, x);
      for (size_t i = 0; i < 256; ++i) {
        ASSERT_NEAR(y[i], x[i], 1.5f * 3e-3f)
            << TensorTypeName(tb.type) << " spike at " << k << ", element " << i;
      }
    }
  }
}

using bicache::testing::ErrorMessage;

TEST(FormatQuantize, BadRowLengthAndType) {
  std::vector<float> x(300, 1.0f);
  std::vector<uint8_t> out(1024);
  std::string m = ErrorMessage(ErrorKind::kInvalidArgument,
                               [&] { EncodeRow(TensorType::Q4_K, x.data(), 300, out.data()); });
  EXPECT_NE(m.find("300"), std::string::npos) << m;
  EXPECT_NE(m.find("256"), std::string::npos) << m;
  EXPECT_NE(m.find("Q4_K"), std::string::npos) << m;
  m = ErrorMessage(ErrorKind::kInvalidArgument,
                   [&] { EncodeTensor(TensorType::Q5_1, std::vector<float>(40)); });
  EXPECT_NE(m.find("40"), std::string::npos) << m;
  EXPECT_NE(m.find("32"), std::string::npos) << m;
  m = ErrorMessage(ErrorKind::kUnsupported,
                   [&] { EncodeRow(TensorType::Q2_K, x.data(), 256, out.data()); });
  EXPECT_NE(m.find("Q2_K"), std::string::npos) << m;
  EXPECT_TRUE(CanEncode(TensorType::Q6_K));
  EXPECT_FALSE(CanEncode(TensorType::IQ4_XS));
}

TEST(FormatQuantize, HalfConversions) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(NAN))));
}

// The streamed writer produces the same bytes as AddTensor + ToBytes.
TEST(FormatQuantize, WriteStreamedMatchesToBytes) {
  std::vector<float> a(256 * 2), b(7);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.1f * static_cast<float>(i));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
  GgufWriter w;
  w.SetValue("general.architecture", Value::Str("llada"));
  w.SetAlignment(64);
  GgufWriter whole = w;
  whole.AddTensor("m", TensorType::Q4_K, {256, 2}, EncodeTensor(TensorType::Q4_K, a));
  whole.AddTensorF32("v", {7}, b);
  const auto path = std::filesystem::temp_directory_path() /
                    ("bicache_ws_" + std::to_string(::getpid()) + ".gguf");
  w.WriteStreamed(path.string(), {{"m", TensorType::Q4_K, {256, 2}}, {"v", TensorType::F32, {7}}},
                  [&](size_t i) {
                    return i == 0 ? EncodeTensor(TensorType::Q4_K, a)
                                  : EncodeTensor(TensorType::F32, b);
                  });
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, whole.ToBytes());
  GgufFile parsed = GgufFile::Open(path.string());
  EXPECT_EQ(parsed.alignment(), 64u);
  EXPECT_EQ(parsed.tensors().size(), 2u);
  // A producer returning the wrong size is refused, naming the tensor.
  std::string m = ErrorMessage(ErrorKind::kInvalidArgument, [&] {
    w.WriteStreamed(path.string(), {{"m", TensorType::Q4_K, {256, 2}}},
                    [](size_t) { return std::vector<uint8_t>(5); });
  });
  EXPECT_NE(m.find("'m'"), std::string::npos) << m;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace bicache::format
