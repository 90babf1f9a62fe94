// Quantized tensors in damaged files: a row length that is not a whole number of blocks, data cut
// short, and a ggml type this program cannot read each give one error naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "util/error.h"

namespace bicache::format {
namespace {

// A one-tensor file: "blk.0.ffn_up.weight" of `type` with ne = {in, 2}, zero data.
std::vector<uint8_t> OneTensorFile(TensorType type, uint64_t in) {
  uint64_t elems = 0, bytes = 0;
  TensorTypeLayout(type, &elems, &bytes);
  GgufWriter w;
  w.SetValue("general.architecture", Value::Str("llada"));
  w.AddTensor("blk.0.ffn_up.weight", type, {in, 2},
              std::vector<uint8_t>(in / elems * bytes * 2, 0));
  return w.ToBytes();
}

// Offset of the u32 type field of the file's first tensor (name "blk.0.ffn_up.weight", 2 dims).
size_t TypeFieldOffset(const std::vector<uint8_t>& file) {
  const std::string name = "blk.0.ffn_up.weight";
  const auto it = std::search(file.begin(), file.end(), name.begin(), name.end());
  EXPECT_NE(it, file.end());
  return static_cast<size_t>(it - file.begin()) + name.size() + 4 /* n_dims */ + 2 * 8 /* ne */;
}

std::string ErrorOf(const std::vector<uint8_t>& file, ErrorKind* kind = nullptr) {
  try {
    GgufFile::FromBytes(file);
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

TEST(GgufQuantFiles, RowNotWholeBlocksIsAnError) {
  // An F32 tensor of 128-value rows retyped as Q4_K: a K-quant super-block holds 256 values.
  auto file = OneTensorFile(TensorType::F32, 128);
  const uint32_t q4k = static_cast<uint32_t>(TensorType::Q4_K);
  std::memcpy(&file[TypeFieldOffset(file)], &q4k, 4);
  const std::string err = ErrorOf(file);
  EXPECT_NE(err.find("blk.0.ffn_up.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("not a multiple of its block size 256"), std::string::npos) << err;
}

TEST(GgufQuantFiles, TruncatedBlocksAreAnError) {
  for (TensorType type : {TensorType::Q6_K, TensorType::IQ4_XS, TensorType::Q5_1}) {
    auto file = OneTensorFile(type, 256);
    file.resize(file.size() - 7);  // the last block loses its tail
    const std::string err = ErrorOf(file);
    EXPECT_NE(err.find("blk.0.ffn_up.weight"), std::string::npos)
        << TensorTypeName(type) << ": " << err;
    EXPECT_NE(err.find("extends past the end of the file"), std::string::npos) << err;
  }
}

TEST(GgufQuantFiles, UnreadableTypesAreNamed) {
  auto file = OneTensorFile(TensorType::F32, 256);
  const struct {
    uint32_t raw;
    const char* name;
  } cases[] = {{16, "IQ2_XXS"}, {21, "IQ3_S"}, {35, "TQ2_0"}, {39, "MXFP4"}};
  for (const auto& c : cases) {
    std::memcpy(&file[TypeFieldOffset(file)], &c.raw, 4);
    ErrorKind kind = ErrorKind::kInternal;
    const std::string err = ErrorOf(file, &kind);
    EXPECT_EQ(kind, ErrorKind::kUnsupported) << err;
    EXPECT_NE(err.find(c.name), std::string::npos) << err;
    EXPECT_NE(err.find("blk.0.ffn_up.weight"), std::string::npos) << err;
  }
}

TEST(GgufQuantFiles, EveryReadableTypeParsesWithItsBlockSize) {
  for (TensorType type :
       {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0,
        TensorType::Q2_K, TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
        TensorType::IQ4_NL, TensorType::IQ4_XS}) {
    const GgufFile f = GgufFile::FromBytes(OneTensorFile(type, 512));
    const TensorInfo* t = f.FindTensor("blk.0.ffn_up.weight");
    ASSERT_NE(t, nullptr);
    uint64_t elems = 0, bytes = 0;
    TensorTypeLayout(type, &elems, &bytes);
    EXPECT_EQ(t->n_bytes, 512 / elems * bytes * 2) << TensorTypeName(type);
  }
}

}  // namespace
}  // namespace bicache::format
