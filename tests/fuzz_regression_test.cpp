// Replays every committed fuzz input through its entry point (fuzz/targets.h): the seed corpora
// (fuzz/corpus/<target>/) and the inputs that once crashed a target (fuzz/regressions/<target>/).
// An entry point aborts on a broken invariant, so a regression fails this test by crashing it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "targets.h"

namespace bicache::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs every file under fuzz/<folder>/<target>/; returns how many there were.
int Replay(const Target& target, const char* folder) {
  const fs::path dir = fs::path(BICACHE_FUZZ_DIR) / folder / target.name;
  if (!fs::is_directory(dir)) return 0;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    SCOPED_TRACE(f.string());
    const std::vector<uint8_t> bytes = ReadBytes(f);
    target.run(Input(bytes.data(), bytes.size()));
  }
  return static_cast<int>(files.size());
}

class FuzzReplay : public ::testing::TestWithParam<Target> {};

TEST_P(FuzzReplay, CorpusAndRegressionsRunClean) {
  const int n = Replay(GetParam(), "corpus") + Replay(GetParam(), "regressions");
  EXPECT_GT(n, 0) << "no committed inputs for fuzz target " << GetParam().name;
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay, ::testing::ValuesIn(kTargets),
                         [](const ::testing::TestParamInfo<Target>& info) {
                           return std::string(info.param.name);
                         });

// Every GGUF bug class the reader defends against (tests/data/gguf_bad) through the whole-file
// entry point as well: rejected cleanly, never a crash.
TEST(FuzzReplayGgufBad, MalformedFilesAreRejectedCleanly) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(BICACHE_TEST_DATA) / "gguf_bad")) {
    SCOPED_TRACE(e.path().string());
    const std::vector<uint8_t> bytes = ReadBytes(e.path());
    GgufBytes(Input(bytes.data(), bytes.size()));
    ++n;
  }
  EXPECT_GE(n, 30);
}

}  // namespace
}  // namespace bicache::fuzz
