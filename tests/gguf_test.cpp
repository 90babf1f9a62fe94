// GGUF writer -> reader round trips, encoders, typed getters, and real files from tests/data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "format/gguf.h"
#include "test_util.h"

namespace bicache::format {
namespace {

namespace fs = std::filesystem;

using bicache::testing::ErrorMessage;

Value Scalar(ValueType type, uint64_t u, int64_t i, double f) {
  Value v;
  v.type = type;
  v.u = u;
  v.i = i;
  v.f = f;
  return v;
}

uint16_t U16At(const std::vector<uint8_t>& b, size_t at) {
  uint16_t v;
  std::memcpy(&v, &b[at], 2);
  return v;
}

uint16_t Half(float f) {
  return U16At(EncodeTensor(TensorType::F16, std::span(&f, 1)), 0);
}
uint16_t Bf16(float f) {
  return U16At(EncodeTensor(TensorType::BF16, std::span(&f, 1)), 0);
}
float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Decodes an f16 (test-only reference; the real decoder lives in kernels).
float HalfToFloat(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float mag = exp == 0 ? std::ldexp(static_cast<float>(mant), -24)
                       : std::ldexp(static_cast<float>(mant | 0x400), exp - 25);
  return (h & 0x8000) ? -mag : mag;
}

TEST(GgufRoundTrip, EveryValueType) {
  GgufWriter w;
  w.SetValue("u8", Scalar(ValueType::UINT8, 200, 0, 0));
  w.SetValue("i8", Scalar(ValueType::INT8, 0, -100, 0));
  w.SetValue("u16", Scalar(ValueType::UINT16, 60000, 0, 0));
  w.SetValue("i16", Scalar(ValueType::INT16, 0, -30000, 0));
  w.SetValue("u32", Value::U32(4000000000u));
  w.SetValue("i32", Value::I32(-2000000000));
  w.SetValue("u64", Value::U64(~uint64_t{0}));
  w.SetValue("i64", Scalar(ValueType::INT64, 0, std::numeric_limits<int64_t>::min(), 0));
  w.SetValue("f32", Value::F32(1.5f));
  w.SetValue("f64", Scalar(ValueType::FLOAT64, 0, 0, 0.1));
  w.SetValue("bool_t", Value::Bool(true));
  w.SetValue("bool_f", Value::Bool(false));
  w.SetValue("str", Value::Str(std::string("nul\0inside", 10)));
  w.SetValue("str_empty", Value::Str(""));
  w.SetValue("arr_str", Value::StrArray({"a", "", "<0x0A>"}));
  w.SetValue("arr_i32", Value::I32Array({-1, 0, 7}));
  w.SetValue("arr_f32", Value::F32Array({0.25f, -3.0f}));
  w.SetValue("arr_u8", Value::Array(ValueType::UINT8, {Scalar(ValueType::UINT8, 1, 0, 0),
                                                       Scalar(ValueType::UINT8, 255, 0, 0)}));
  w.SetValue("arr_bool", Value::Array(ValueType::BOOL, {Value::Bool(true), Value::Bool(false)}));
  w.SetValue("arr_empty", Value::Array(ValueType::INT64, {}));
  w.SetValue(
      "arr_nested",
      Value::Array(ValueType::ARRAY, {Value::Array(ValueType::ARRAY, {Value::StrArray({"x", "y"})}),
                                      Value::Array(ValueType::ARRAY, {})}));

  GgufFile f = GgufFile::FromBytes(w.ToBytes());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 21u);
  EXPECT_EQ(f.Find("u8")->type, ValueType::UINT8);
  EXPECT_EQ(f.GetUInt("u8"), 200u);
  EXPECT_EQ(f.GetInt("i8"), -100);
  EXPECT_EQ(f.Find("i8")->type, ValueType::INT8);
  EXPECT_EQ(f.GetUInt("u16"), 60000u);
  EXPECT_EQ(f.GetInt("i16"), -30000);
  EXPECT_EQ(f.GetUInt("u32"), 4000000000u);
  EXPECT_EQ(f.GetInt("i32"), -2000000000);
  EXPECT_EQ(f.GetUInt("u64"), ~uint64_t{0});
  EXPECT_EQ(f.GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f.GetFloat("f32"), 1.5);
  EXPECT_EQ(f.Find("f32")->type, ValueType::FLOAT32);
  EXPECT_EQ(f.GetFloat("f64"), 0.1);
  EXPECT_EQ(f.Find("f64")->type, ValueType::FLOAT64);
  EXPECT_TRUE(f.GetBool("bool_t"));
  EXPECT_FALSE(f.GetBool("bool_f"));
  EXPECT_EQ(f.GetString("str"), std::string("nul\0inside", 10));
  EXPECT_EQ(f.GetString("str_empty"), "");
  EXPECT_EQ(f.GetStringArray("arr_str"), (std::vector<std::string>{"a", "", "<0x0A>"}));
  EXPECT_EQ(f.GetIntArray("arr_i32"), (std::vector<int64_t>{-1, 0, 7}));
  EXPECT_EQ(f.GetFloatArray("arr_f32"), (std::vector<double>{0.25, -3.0}));
  EXPECT_EQ(f.GetIntArray("arr_u8"), (std::vector<int64_t>{1, 255}));
  const Value* b = f.Find("arr_bool");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->elem_type, ValueType::BOOL);
  ASSERT_EQ(b->elems.size(), 2u);
  EXPECT_EQ(b->elems[0].u, 1u);
  EXPECT_EQ(b->elems[1].u, 0u);
  EXPECT_TRUE(f.GetIntArray("arr_empty").empty());
  EXPECT_EQ(f.Find("arr_empty")->elem_type, ValueType::INT64);

  const Value* nested = f.Find("arr_nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->elem_type, ValueType::ARRAY);
  ASSERT_EQ(nested->elems.size(), 2u);
  const Value& inner = nested->elems[0];
  EXPECT_EQ(inner.elem_type, ValueType::ARRAY);
  ASSERT_EQ(inner.elems.size(), 1u);
  EXPECT_EQ(inner.elems[0].elem_type, ValueType::STRING);
  ASSERT_EQ(inner.elems[0].elems.size(), 2u);
  EXPECT_EQ(inner.elems[0].elems[1].s, "y");
  EXPECT_TRUE(nested->elems[1].elems.empty());
}

TEST(GgufWriter, KeysAreWrittenInInsertionOrderAndSetValueReplaces) {
  GgufWriter w;
  w.SetValue("zzz", Value::U32(1));
  w.SetValue("aaa", Value::U32(2));
  w.SetValue("zzz", Value::U32(3));  // replaced in place
  std::vector<uint8_t> bytes = w.ToBytes();
  std::string s(bytes.begin(), bytes.end());
  ASSERT_NE(s.find("zzz"), std::string::npos);
  EXPECT_LT(s.find("zzz"), s.find("aaa"));
  GgufFile f = GgufFile::FromBytes(bytes);
  EXPECT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.GetUInt("zzz"), 3u);
}

TEST(GgufRoundTrip, EveryTensorType) {
  struct Case {
    TensorType type;
    std::vector<uint64_t> ne;
  };
  const std::vector<Case> cases = {
      {TensorType::F32, {3, 2}},
      {TensorType::F16, {5}},
      {TensorType::BF16, {2, 2, 2}},
      {TensorType::Q8_0, {64, 2}},
      {TensorType::Q4_0, {32, 1, 1, 3}},
      {TensorType::Q4_1, {32}},
      {TensorType::Q5_0, {64}},
      {TensorType::Q5_1, {32, 2}},
      {TensorType::Q8_1, {32}},
      {TensorType::Q2_K, {256}},
      {TensorType::Q3_K, {256, 2}},
      {TensorType::Q4_K, {512}},
      {TensorType::Q5_K, {256}},
      {TensorType::Q6_K, {256, 3}},
      {TensorType::Q8_K, {256}},
      {TensorType::I8, {7}},
      {TensorType::I16, {7}},
      {TensorType::I32, {7}},
      {TensorType::I64, {7}},
      {TensorType::F64, {7}},
  };
  GgufWriter w;
  std::vector<std::vector<uint8_t>> payloads;
  for (size_t c = 0; c < cases.size(); ++c) {
    uint64_t n = 1;
    for (uint64_t d : cases[c].ne) n *= d;
    uint64_t block_elems = 0, block_bytes = 0;
    ASSERT_TRUE(TensorTypeLayout(cases[c].type, &block_elems, &block_bytes));
    std::vector<uint8_t> data(n / block_elems * block_bytes);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + c);
    payloads.push_back(data);
    w.AddTensor("t." + TensorTypeName(cases[c].type), cases[c].type, cases[c].ne, data);
  }
  w.SetAlignment(64);
  std::vector<uint8_t> bytes = w.ToBytes();
  GgufFile f = GgufFile::FromBytes(bytes);
  EXPECT_EQ(f.alignment(), 64u);
  ASSERT_EQ(f.tensors().size(), cases.size());
  const uint8_t* base = f.tensors()[0].data - f.tensors()[0].offset;
  for (size_t c = 0; c < cases.size(); ++c) {
    const TensorInfo& t = f.tensors()[c];
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, "t." + TensorTypeName(cases[c].type));
    EXPECT_EQ(t.type, cases[c].type);
    EXPECT_EQ(t.ne, cases[c].ne);
    EXPECT_EQ(t.n_bytes, payloads[c].size());
    EXPECT_EQ(t.offset % 64, 0u);
    EXPECT_EQ((t.data - base) % 64, 0);  // data section start is aligned too
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), payloads[c]);
    EXPECT_EQ(f.FindTensor(t.name), &t);
  }
  EXPECT_EQ(f.FindTensor("nope"), nullptr);
}

TEST(GgufRoundTrip, EncodedTensorsKeepTheirBytesAndCounts) {
  std::vector<float> values(64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(static_cast<float>(i));
  GgufWriter w;
  for (TensorType type :
       {TensorType::F32, TensorType::F16, TensorType::BF16, TensorType::Q8_0, TensorType::Q4_0}) {
    w.AddTensor(TensorTypeName(type), type, {32, 2}, EncodeTensor(type, values));
  }
  GgufFile f = GgufFile::FromBytes(w.ToBytes());
  for (const TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.n_elements, 64u);
    std::vector<uint8_t> expect = EncodeTensor(t.type, values);
    EXPECT_EQ(std::vector<uint8_t>(t.data, t.data + t.n_bytes), expect) << t.name;
  }
  const TensorInfo* f32 = f.FindTensor("F32");
  ASSERT_NE(f32, nullptr);
  float x;
  std::memcpy(&x, f32->data + 5 * 4, 4);
  EXPECT_EQ(x, values[5]);
}

TEST(GgufRoundTrip, Version2FileIsAccepted) {
  GgufWriter w;
  w.SetValue("general.architecture", Value::Str("dream"));
  std::vector<float> v = {1, 2, 3, 4};
  w.AddTensorF32("w", {4}, v);
  std::vector<uint8_t> bytes = w.ToBytes();
  bytes[4] = 2;  // version field; v2 and v3 share the layout
  GgufFile f = GgufFile::FromBytes(bytes);
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.GetString("general.architecture"), "dream");
  ASSERT_NE(f.FindTensor("w"), nullptr);
}

TEST(GgufRoundTrip, OpenMapsAWrittenFileAndSurvivesMoves) {
  fs::path path = fs::path(::testing::TempDir()) / "gguf_roundtrip.gguf";
  GgufWriter w;
  w.SetValue("k", Value::U32(9));
  std::vector<float> v = {0.5f, -0.5f};
  w.AddTensorF32("w", {2}, v);
  w.Write(path.string());
  GgufFile opened = GgufFile::Open(path.string());
  GgufFile moved = std::move(opened);
  EXPECT_EQ(moved.file_size(), fs::file_size(path));
  const TensorInfo* t = moved.FindTensor("w");
  ASSERT_NE(t, nullptr);
  float got[2];
  std::memcpy(got, t->data, 8);
  EXPECT_EQ(got[0], 0.5f);
  EXPECT_EQ(got[1], -0.5f);
  fs::remove(path);
}

TEST(GgufRoundTrip, EmptyFileWithNoTensorsOrMetadata) {
  GgufWriter w;
  GgufFile f = GgufFile::FromBytes(w.ToBytes());
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.file_size(), 24u);
}

TEST(GgufWriter, RejectsInconsistentTensors) {
  GgufWriter w;
  std::string m = ErrorMessage(ErrorKind::kInvalidArgument, [&] {
    w.AddTensor("a", TensorType::F32, {4}, std::vector<uint8_t>(15));
  });
  EXPECT_NE(m.find("'a'"), std::string::npos) << m;
  m = ErrorMessage(ErrorKind::kInvalidArgument,
                   [&] { w.AddTensor("q", TensorType::Q8_0, {16}, std::vector<uint8_t>(17)); });
  EXPECT_NE(m.find("block size"), std::string::npos) << m;
  m = ErrorMessage(ErrorKind::kInvalidArgument, [&] {
    w.AddTensor("z", TensorType::F32, {4, 0}, {});
  });
  EXPECT_NE(m.find("'z'"), std::string::npos) << m;
  m = ErrorMessage(ErrorKind::kInvalidArgument, [&] {
    w.AddTensor("d", TensorType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4));
  });
  EXPECT_NE(m.find("'d'"), std::string::npos) << m;
  w.AddTensor("ok", TensorType::F32, {1}, std::vector<uint8_t>(4));
  m = ErrorMessage(ErrorKind::kInvalidArgument,
                   [&] { w.AddTensor("ok", TensorType::F32, {1}, std::vector<uint8_t>(4)); });
  EXPECT_NE(m.find("duplicate"), std::string::npos) << m;
  ErrorMessage(ErrorKind::kInvalidArgument, [&] { w.SetAlignment(48); });
  ErrorMessage(ErrorKind::kInvalidArgument, [&] {
    w.SetValue("mixed", Value::Array(ValueType::INT32, {Value::I32(1), Value::F32(2)}));
    (void)w.ToBytes();
  });
}

TEST(GgufWriter, WriteToAnImpossiblePathIsAnIoError) {
  GgufWriter w;
  std::string m = ErrorMessage(ErrorKind::kIo, [&] { w.Write("/nonexistent-dir/sub/out.gguf"); });
  EXPECT_NE(m.find("/nonexistent-dir/sub/out.gguf"), std::string::npos) << m;
}

TEST(GgufGetters, WrongTypesAndRangesAreModelErrorsNamingTheKey) {
  GgufWriter w;
  w.SetValue("neg", Value::I32(-3));
  w.SetValue("big", Value::U64(~uint64_t{0}));
  w.SetValue("name", Value::Str("llada"));
  w.SetValue("flag", Value::Bool(true));
  w.SetValue("bytes", Value::Array(ValueType::UINT8, {Scalar(ValueType::UINT8, 3, 0, 0)}));
  w.SetValue("floats", Value::F32Array({1.0f}));
  w.SetValue("ints", Value::I32Array({1}));
  w.SetValue("count", Value::I32(12));
  GgufFile f = GgufFile::FromBytes(w.ToBytes());

  auto expect_model_error = [&](auto&& call, const std::string& key, const std::string& detail) {
    std::string m = ErrorMessage(ErrorKind::kModel, call);
    EXPECT_NE(m.find("'" + key + "'"), std::string::npos) << m;
    EXPECT_NE(m.find(detail), std::string::npos) << m;
  };
  expect_model_error([&] { f.GetUInt("neg"); }, "neg", "-3");
  expect_model_error([&] { f.GetUIntOr("neg"); }, "neg", "non-negative");
  expect_model_error([&] { f.GetInt("big"); }, "big", "INT64_MAX");
  expect_model_error([&] { f.GetUInt("name"); }, "name", "STRING");
  expect_model_error([&] { f.GetFloat("name"); }, "name", "STRING");
  expect_model_error([&] { f.GetString("count"); }, "count", "INT32");
  expect_model_error([&] { f.GetBool("count"); }, "count", "INT32");
  expect_model_error([&] { f.GetUInt("missing.key"); }, "missing.key", "missing");
  expect_model_error([&] { f.GetStringArray("missing.key"); }, "missing.key", "missing");
  // Bug class 3: a byte array must not be read as floats, nor floats/strings as integers.
  expect_model_error([&] { f.GetFloatArray("bytes"); }, "bytes", "UINT8");
  expect_model_error([&] { f.GetIntArray("floats"); }, "floats", "FLOAT32");
  expect_model_error([&] { f.GetIntArray("name"); }, "name", "STRING");
  expect_model_error([&] { f.GetStringArray("ints"); }, "ints", "INT32");
  expect_model_error([&] { f.GetStringOr("flag"); }, "flag", "BOOL");

  EXPECT_EQ(f.GetUInt("count"), 12u);
  EXPECT_EQ(f.GetInt("neg"), -3);
  EXPECT_EQ(f.GetFloat("count"), 12.0);
  EXPECT_EQ(f.GetIntArray("bytes"), (std::vector<int64_t>{3}));
  EXPECT_EQ(f.GetUIntOr("absent"), std::nullopt);
  EXPECT_EQ(f.GetFloatOr("absent"), std::nullopt);
  EXPECT_EQ(f.GetBoolOr("absent"), std::nullopt);
  EXPECT_EQ(f.GetStringOr("absent"), std::nullopt);
  EXPECT_EQ(f.GetBoolOr("flag"), true);
  EXPECT_EQ(f.GetStringOr("name"), "llada");
  EXPECT_FALSE(f.Has("absent"));
  EXPECT_TRUE(f.Has("name"));
}

TEST(GgufEncode, Float16RoundsToNearestEven) {
  EXPECT_EQ(Half(1.0f), 0x3c00);
  EXPECT_EQ(Half(-2.0f), 0xc000);
  EXPECT_EQ(Half(0.0f), 0x0000);
  EXPECT_EQ(Half(-0.0f), 0x8000);
  EXPECT_EQ(Half(0.1f), 0x2e66);
  EXPECT_EQ(Half(65504.0f), 0x7bff);
  EXPECT_EQ(Half(65519.0f), 0x7bff);
  EXPECT_EQ(Half(65520.0f), 0x7c00);  // halfway to the next power: ties to even = inf
  EXPECT_EQ(Half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(Half(-std::numeric_limits<float>::infinity()), 0xfc00);
  uint16_t nan = Half(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(Half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(Half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(Half(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(Half(std::ldexp(1.0f, -25)), 0x0000);             // tie -> even (zero)
  EXPECT_EQ(Half(std::ldexp(3.0f, -25)), 0x0002);             // tie -> even (up)
  EXPECT_EQ(Half(std::ldexp(1.0f, -14)), 0x0400);             // smallest normal
  EXPECT_EQ(Half(std::ldexp(1023.5f, -24)), 0x0400);          // subnormal rounding into normal
  // Every f16 value survives a decode/encode trip.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(Half(HalfToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(GgufEncode, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(Bf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16(-2.0f), 0xc000);
  EXPECT_EQ(Bf16(FromBits(0x3f808000)), 0x3f80);  // tie -> even (down)
  EXPECT_EQ(Bf16(FromBits(0x3f818000)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(Bf16(FromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(Bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  uint16_t nan = Bf16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  EXPECT_EQ(Bf16(FromBits(0x7f800001)) & 0x7f, 0x40);  // signalling NaN stays NaN, not inf
}

TEST(GgufEncode, Q8_0BlockLayout) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16) * 0.5f;  // max |x| = 8
  std::vector<uint8_t> b = EncodeTensor(TensorType::Q8_0, x);
  ASSERT_EQ(b.size(), 34u);
  float d = HalfToFloat(U16At(b, 0));
  EXPECT_NEAR(d, 8.0f / 127.0f, 1e-4);
  EXPECT_EQ(static_cast<int8_t>(b[2]), -127);  // x[0] = -8
  for (int j = 0; j < 32; ++j) {
    EXPECT_NEAR(static_cast<int8_t>(b[2 + j]) * d, x[j], d * 0.51f + 1e-3f) << j;
  }
  std::vector<uint8_t> zeros = EncodeTensor(TensorType::Q8_0, std::vector<float>(32, 0.0f));
  EXPECT_EQ(zeros, std::vector<uint8_t>(34, 0));
  ErrorMessage(ErrorKind::kInvalidArgument,
               [&] { EncodeTensor(TensorType::Q8_0, std::vector<float>(33)); });
}

TEST(GgufEncode, Q4_0BlockLayout) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) * 0.25f - 2.0f;  // -2 .. 5.75
  std::vector<uint8_t> b = EncodeTensor(TensorType::Q4_0, x);
  ASSERT_EQ(b.size(), 18u);
  float d = HalfToFloat(U16At(b, 0));
  EXPECT_NEAR(d, 5.75f / -8.0f, 1e-3);  // signed: the largest magnitude is positive
  for (int j = 0; j < 32; ++j) {
    int q = j < 16 ? (b[2 + j] & 0x0f) : (b[2 + j - 16] >> 4);
    EXPECT_NEAR((q - 8) * d, x[j], std::fabs(d) * 0.51f + 1e-3f) << j;
  }
  EXPECT_EQ(b[2 + 31 - 16] >> 4, 0);  // the extreme value maps to q = 0
  std::vector<uint8_t> zeros = EncodeTensor(TensorType::Q4_0, std::vector<float>(32, 0.0f));
  EXPECT_EQ(HalfToFloat(U16At(zeros, 0)), 0.0f);  // -0 like ggml (0 / -8)
  for (int j = 0; j < 16; ++j) EXPECT_EQ(zeros[2 + j], 0x88);
  ErrorMessage(ErrorKind::kUnsupported, [&] {
    EncodeTensor(TensorType::Q2_K, std::vector<float>(256));
  });  // Q4_K etc.: format_quantize_test
}

TEST(GgufTypes, NamesAndLayouts) {
  EXPECT_EQ(TensorTypeName(TensorType::Q4_0), "Q4_0");
  EXPECT_EQ(TensorTypeName(static_cast<TensorType>(99)), "type#99");
  EXPECT_EQ(ValueTypeName(ValueType::ARRAY), "ARRAY");
  uint64_t e = 0, b = 0;
  ASSERT_TRUE(TensorTypeLayout(TensorType::Q6_K, &e, &b));
  EXPECT_EQ(e, 256u);
  EXPECT_EQ(b, 210u);
  EXPECT_FALSE(TensorTypeLayout(static_cast<TensorType>(16), &e, &b));
}

// The committed model fixtures (written by the project's converter) parse cleanly.
TEST(GgufRealFiles, GoldenModelsParse) {
  fs::path dir = fs::path(BICACHE_TEST_DATA) / "golden";
  int seen = 0;
  if (fs::is_directory(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() != ".gguf") continue;
      SCOPED_TRACE(entry.path().string());
      GgufFile f = GgufFile::Open(entry.path().string());
      EXPECT_FALSE(f.tensors().empty());
      EXPECT_TRUE(f.Has("general.architecture"));
      ++seen;
    }
  }
  if (seen == 0) GTEST_SKIP() << "no .gguf files under " << dir;
}

}  // namespace
}  // namespace bicache::format
