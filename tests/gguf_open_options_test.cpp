// GgufFile::Open's OpenOptions: a file read into memory (mmap = false) holds the same tensors as
// the mapped one and stays valid after the file on disk is truncated; a missing file is still a kIo
// error naming it with either option.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "format/gguf.h"
#include "test_util.h"
#include "util/error.h"

namespace bicache::format {
namespace {

namespace fs = std::filesystem;
using bicache::testing::DataPath;

TEST(GgufOpenOptions, ReadIntoMemoryEqualsMappedAndOutlivesTruncation) {
  const fs::path copy =
      fs::temp_directory_path() / ("bicache-open-" + std::to_string(::getpid()) + ".gguf");
  fs::copy_file(DataPath("golden/llada-tiny-q8_0.gguf"), copy,
                fs::copy_options::overwrite_existing);
  const GgufFile mapped = GgufFile::Open(DataPath("golden/llada-tiny-q8_0.gguf"));
  OpenOptions read;
  read.mmap = false;
  const GgufFile loaded = GgufFile::Open(copy.string(), read);
  fs::resize_file(copy, 0);  // what rewriting a served model in place does
  ASSERT_EQ(loaded.tensors().size(), mapped.tensors().size());
  for (size_t i = 0; i < mapped.tensors().size(); ++i) {
    const TensorInfo& a = mapped.tensors()[i];
    const TensorInfo& b = loaded.tensors()[i];
    EXPECT_EQ(a.name, b.name);
    ASSERT_EQ(a.n_bytes, b.n_bytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.n_bytes), 0) << a.name;
  }
  fs::remove(copy);
}

TEST(GgufOpenOptions, MissingFileIsAnIoErrorEitherWay) {
  for (const bool mmap : {true, false}) {
    OpenOptions o;
    o.mmap = mmap;
    const std::string msg = bicache::testing::ErrorMessage(
        ErrorKind::kIo, [&] { GgufFile::Open("/nonexistent/model.gguf", o); });
    EXPECT_NE(msg.find("/nonexistent/model.gguf"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace bicache::format
