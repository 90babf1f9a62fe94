// The GGUF reader against malformed files: every bug class must come back as a typed Error whose
// message names the key or tensor at fault, never a crash, abort or huge allocation.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "format/gguf.h"
#include "gguf_bad_files.h"
#include "test_util.h"

namespace bicache::format {
namespace {

using bicache::testing::Bytes;
namespace fs = std::filesystem;

// Runs f, which must throw Error of `kind`; returns the message.
using bicache::testing::ErrorMessage;

void WriteFile(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// A valid file with metadata of several types and three tensors; the last tensor ends the file.
Bytes ValidWriterFile() {
  GgufWriter w;
  w.SetValue("general.architecture", Value::Str("llada"));
  w.SetValue("llada.block_count", Value::U32(2));
  w.SetValue("tokenizer.ggml.tokens", Value::StrArray({"a", "bc", "<mask>"}));
  w.SetValue("tokenizer.ggml.scores", Value::F32Array({0.5f, -1.0f, 2.0f}));
  w.SetValue("nested",
             Value::Array(ValueType::ARRAY, {Value::I32Array({1, 2}), Value::I32Array({3})}));
  std::vector<float> v(64, 0.25f);
  w.AddTensorF32("a", {8, 2}, std::span(v).first(16));
  w.AddTensor("b", TensorType::Q8_0, {32, 2}, EncodeTensor(TensorType::Q8_0, v));
  w.AddTensor("c", TensorType::F16, {3}, EncodeTensor(TensorType::F16, std::span(v).first(3)));
  return w.ToBytes();
}

class BadGgufTest : public ::testing::TestWithParam<testing::BadGguf> {};

TEST_P(BadGgufTest, RejectedWithFormatErrorNamingTheCulprit) {
  const testing::BadGguf& bad = GetParam();
  std::string message = ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::FromBytes(bad.bytes); });
  EXPECT_NE(message.find(bad.expect_in_message), std::string::npos)
      << bad.file_name << ": '" << message << "' does not mention '" << bad.expect_in_message
      << "'";
}

INSTANTIATE_TEST_SUITE_P(Classes, BadGgufTest, ::testing::ValuesIn(testing::MakeBadGgufFiles()),
                         [](const ::testing::TestParamInfo<testing::BadGguf>& info) {
                           std::string name =
                               info.param.file_name.substr(0, info.param.file_name.find('.'));
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(GgufMalformedFiles, GeneratedFilesAreRejectedByOpenWithThePath) {
  fs::path dir = fs::path(::testing::TempDir()) / "gguf_bad_regenerated";
  fs::create_directories(dir);
  for (const testing::BadGguf& bad : testing::MakeBadGgufFiles()) {
    fs::path path = dir / bad.file_name;
    WriteFile(path, bad.bytes);
    std::string message = ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::Open(path); });
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    EXPECT_NE(message.find(bad.expect_in_message), std::string::npos) << message;
  }
  fs::remove_all(dir);
}

TEST(GgufMalformedFiles, CommittedCorpusIsCompleteAndRejected) {
  fs::path dir = fs::path(BICACHE_TEST_DATA) / "gguf_bad";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::set<std::string> committed;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    committed.insert(entry.path().filename().string());
    std::string message =
        ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::Open(entry.path().string()); });
    EXPECT_FALSE(message.empty()) << entry.path();
  }
  for (const testing::BadGguf& bad : testing::MakeBadGgufFiles()) {
    EXPECT_TRUE(committed.count(bad.file_name))
        << bad.file_name << " is missing from " << dir
        << "; regenerate with --gtest_also_run_disabled_tests --gtest_filter=*WriteCorpus";
  }
}

// Regenerates tests/data/gguf_bad/ (run by hand after changing gguf_bad_files.cpp).
TEST(GgufMalformedFiles, DISABLED_WriteCorpus) {
  fs::path dir = fs::path(BICACHE_TEST_DATA) / "gguf_bad";
  fs::create_directories(dir);
  for (const testing::BadGguf& bad : testing::MakeBadGgufFiles()) {
    WriteFile(dir / bad.file_name, bad.bytes);
  }
}

TEST(GgufMalformed, EveryTruncationIsAFormatError) {
  Bytes full = ValidWriterFile();
  ASSERT_NO_THROW(GgufFile::FromBytes(full));
  for (size_t len = 0; len < full.size(); ++len) {
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    std::string message = ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::FromBytes(cut); });
    if (message.empty()) {
      ADD_FAILURE() << "a " << len << "-byte prefix was accepted";
      break;
    }
  }
}

// Deterministic mutation fuzz: random byte edits either parse (with every tensor inside the
// image) or throw bicache::Error; nothing else may escape.
TEST(GgufMalformed, RandomByteEditsNeverEscapeAsOtherExceptions) {
  const Bytes base = ValidWriterFile();
  std::mt19937_64 rng(1234);
  for (int iter = 0; iter < 3000; ++iter) {
    Bytes mutated = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % mutated.size();
      switch (rng() % 3) {
        case 0:
          mutated[pos] = static_cast<uint8_t>(rng());
          break;
        case 1:
          mutated[pos] = 0xff;
          break;
        default:
          mutated[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
      }
    }
    try {
      GgufFile f = GgufFile::FromBytes(mutated);
      for (const TensorInfo& t : f.tensors()) {
        EXPECT_LE(t.offset + t.n_bytes, f.file_size()) << t.name;
      }
    } catch (const Error&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << iter << " threw a non-bicache exception: " << e.what();
    }
  }
}

TEST(GgufMalformed, CountsLargerThanTheFileAreRejectedBeforeReading) {
  Bytes bytes = ValidWriterFile();
  Bytes patched = bytes;
  uint64_t kv_count = uint64_t{1} << 40;
  std::memcpy(&patched[16], &kv_count, 8);
  std::string message = ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::FromBytes(patched); });
  EXPECT_NE(message.find("kv count"), std::string::npos) << message;

  patched = bytes;
  uint64_t tensor_count = uint64_t{1} << 40;
  std::memcpy(&patched[8], &tensor_count, 8);
  message = ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::FromBytes(patched); });
  EXPECT_NE(message.find("tensor count"), std::string::npos) << message;

  patched = bytes;  // one more kv than written: the tensor infos get read as a kv
  uint64_t one_more = 6;
  std::memcpy(&patched[16], &one_more, 8);
  EXPECT_THROW(GgufFile::FromBytes(patched), Error);
}

TEST(GgufMalformed, BigEndianVersionIsCalledOut) {
  Bytes bytes = ValidWriterFile();
  bytes[4] = 0;
  bytes[7] = 3;
  std::string message = ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::FromBytes(bytes); });
  EXPECT_NE(message.find("big-endian"), std::string::npos) << message;
}

TEST(GgufMalformed, TooManyArrayElementsOverallIsRejectedBeforeAllocating) {
  // 9M one-byte elements fit in the file but exceed the metadata element cap.
  const uint64_t count = (uint64_t{1} << 23) + 1;
  testing::RawGguf g;
  Bytes value = testing::Concat({testing::LeU32(0), testing::LeU64(count)});
  value.resize(value.size() + count, 1);
  g.kvs.push_back(testing::KvRecord("huge.bytes", 9, value));
  std::string message = ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::FromBytes(g.Build()); });
  EXPECT_NE(message.find("huge.bytes"), std::string::npos) << message;
}

TEST(GgufMalformed, KnownGgmlTypeWithoutLayoutIsUnsupported) {
  testing::RawGguf g;
  g.tensors.push_back({"iq", {256}, std::nullopt, 16 /* IQ2_XXS */, 0});
  g.data = Bytes(256, 0);
  std::string message =
      ErrorMessage(ErrorKind::kUnsupported, [&] { GgufFile::FromBytes(g.Build()); });
  EXPECT_NE(message.find("'iq'"), std::string::npos) << message;
}

TEST(GgufMalformed, TensorInfoBeyondTheDeclaredDataIsRejected) {
  // Data section present but one byte short for the last tensor.
  testing::RawGguf g;
  g.tensors.push_back({"x", {4}, std::nullopt, 0, 0});
  g.tensors.push_back({"y", {4}, std::nullopt, 0, 32});
  g.data = Bytes(32 + 15, 0);
  std::string message = ErrorMessage(ErrorKind::kFormat, [&] { GgufFile::FromBytes(g.Build()); });
  EXPECT_NE(message.find("'y'"), std::string::npos) << message;
}

TEST(GgufOpen, MissingFileIsAnIoErrorWithThePath) {
  std::string path = ::testing::TempDir() + "/definitely_missing.gguf";
  std::string message = ErrorMessage(ErrorKind::kIo, [&] { GgufFile::Open(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("No such file"), std::string::npos) << message;
}

TEST(GgufOpen, DirectoryIsAnIoError) {
  std::string path = ::testing::TempDir();
  std::string message = ErrorMessage(ErrorKind::kIo, [&] { GgufFile::Open(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("directory"), std::string::npos) << message;
}

TEST(GgufOpen, EmptyFileIsAnIoError) {
  fs::path path = fs::path(::testing::TempDir()) / "empty.gguf";
  WriteFile(path, {});
  std::string message = ErrorMessage(ErrorKind::kIo, [&] { GgufFile::Open(path); });
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("empty"), std::string::npos) << message;
  fs::remove(path);
}

}  // namespace
}  // namespace bicache::format
