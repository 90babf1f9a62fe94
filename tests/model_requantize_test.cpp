// model::Requantize (model/requantize.h) as a library call: the report matches the file written,
// the progress callbacks see every tensor once, the K-quant recipe's fallbacks are reported, and
// each refused input is a FieldError naming the option it is about. The numerical quality of the
// quantised files is tests/cli/quantize.sh's.
#include "model/requantize.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "format/gguf.h"
#include "test_util.h"
#include "util/field_error.h"

namespace bicache::model {
namespace {

namespace fs = std::filesystem;

class RequantizeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bicache-requantize-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Out(const std::string& name) const { return (dir_ / name).string(); }

  const std::string in_ = testing::DataPath("golden/llada-tiny.gguf");
  fs::path dir_;
};

RequantizeOptions Opts(const std::string& in, const std::string& out, const std::string& type) {
  RequantizeOptions o;
  o.input = in;
  o.output = out;
  o.type = type;
  return o;
}

// The FieldError Requantize throws for `o`, with its field (fails when it throws none).
std::string FieldOf(const RequantizeOptions& o, ErrorKind kind) {
  try {
    Requantize(o);
  } catch (const FieldError& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.field();
  }
  ADD_FAILURE() << "no FieldError";
  return "";
}

TEST_F(RequantizeTest, ReportMatchesTheFileWritten) {
  RequantizeOptions o = Opts(in_, Out("q.gguf"), "q4_k_m");
  size_t started = 0, seen = 0;
  o.on_start = [&](const RequantizeStart& s) {
    EXPECT_EQ(s.recipe, "Q4_K_M");
    started = s.n_tensors;
  };
  o.on_tensor = [&](const RequantizedTensor& t) { EXPECT_EQ(t.index, seen++); };
  const RequantizeReport r = Requantize(o);

  const format::GgufFile src = format::GgufFile::Open(in_);
  const format::GgufFile out = format::GgufFile::Open(o.output);
  EXPECT_EQ(r.recipe, "Q4_K_M");
  EXPECT_EQ(r.file_type, 15u);  // llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M
  ASSERT_EQ(r.tensors.size(), src.tensors().size());
  EXPECT_EQ(started, r.tensors.size());
  EXPECT_EQ(seen, r.tensors.size());
  uint64_t bytes_out = 0;
  for (const RequantizedTensor& t : r.tensors) {
    const format::TensorInfo* written = out.FindTensor(t.name);
    ASSERT_NE(written, nullptr) << t.name;
    EXPECT_EQ(written->type, t.to) << t.name;
    EXPECT_EQ(written->n_bytes, t.bytes_out) << t.name;
    bytes_out += t.bytes_out;
  }
  EXPECT_EQ(bytes_out, r.bytes_out);
  EXPECT_FALSE(fs::exists(o.output + ".partial"));
}

TEST_F(RequantizeTest, RowsNarrowerThanAKBlockFallBackAndSayWhy) {
  // d_model 64: no row is a multiple of the K types' 256, so Q4_K falls back to Q5_0, the Q6_K of
  // the "more bits" layers to Q8_0; norms stay F32.
  const RequantizeReport r = Requantize(Opts(in_, Out("q.gguf"), "Q4_K_M"));
  int fell_back = 0;
  for (const RequantizedTensor& t : r.tensors) {
    if (t.name.ends_with("_norm.weight")) {
      EXPECT_FALSE(t.fell_back) << t.name;
      EXPECT_EQ(t.to, format::TensorType::F32) << t.name;
      continue;
    }
    if (!t.fell_back) continue;
    ++fell_back;
    EXPECT_EQ(t.wanted_block, 256u) << t.name;
    const format::TensorType expect_to =
        t.wanted == format::TensorType::Q6_K ? format::TensorType::Q8_0 : format::TensorType::Q5_0;
    EXPECT_EQ(t.to, expect_to) << t.name;
  }
  EXPECT_GT(fell_back, 0);
}

TEST_F(RequantizeTest, MoeRouterKeepsItsTypeExpertsAreQuantized) {
  // Top-k routing is a hard choice: a rounded router sends rows to other experts (llama.cpp keeps
  // ffn_gate_inp in F32 too). The experts themselves are quantised like any matrix.
  const RequantizeReport r =
      Requantize(Opts(testing::DataPath("moe/llada-moe-tiny.gguf"), Out("moe.gguf"), "Q8_0"));
  int routers = 0, experts = 0;
  for (const RequantizedTensor& t : r.tensors) {
    if (t.name.ends_with("ffn_gate_inp.weight")) {
      ++routers;
      EXPECT_EQ(t.to, format::TensorType::F32) << t.name;
    } else if (t.name.ends_with("_exps.weight")) {
      ++experts;
      EXPECT_EQ(t.to, format::TensorType::Q8_0) << t.name;
    }
  }
  EXPECT_GT(routers, 0);
  EXPECT_GT(experts, 0);
}

TEST_F(RequantizeTest, RefusalsNameTheOption) {
  EXPECT_EQ(FieldOf(Opts(in_, Out("x.gguf"), "Q3_XX"), ErrorKind::kInvalidArgument), "type");
  EXPECT_EQ(FieldOf(Opts(Out("none.gguf"), Out("x.gguf"), "Q8_0"), ErrorKind::kIo), "input");
  EXPECT_EQ(FieldOf(Opts(in_, in_, "Q8_0"), ErrorKind::kInvalidArgument), "output");
  EXPECT_EQ(FieldOf(Opts(in_, Out("no/such/dir/x.gguf"), "Q8_0"), ErrorKind::kIo), "output");
  EXPECT_FALSE(fs::exists(Out("x.gguf")));
}

}  // namespace
}  // namespace bicache::model
