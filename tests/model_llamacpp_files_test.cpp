// GGUF files as llama.cpp's llama-quantize writes them (tests/data/llamacpp/, README.md there):
// one random-weight LLaDA (d 256, 4 heads / 1 KV head, ff 256, 1 layer, vocab 272) in bf16 and
// quantized to Q8_0, Q6_K, Q5_K_M, Q4_K_M, Q4_0, IQ4_XS, Q3_K_M, Q2_K and a mix of Q4_1, Q5_0,
// Q5_1 and IQ4_NL tensors (with llama-quantize's own per-tensor choices: Q6_K output, Q4_K/Q5_K
// attn_v, ...). Every file loads, holds the tensor types manifest.json lists, and its logits for a
// fixed token sequence are
//  - close to the numpy float64 forward on gguf-py-dequantized weights (<file>.ref-logits.f32,
//    tools/reference/make_llamacpp_ref_logits.py): only bicache's bf16 matmuls differ;
//  - close to llama.cpp's own logits for the same file (<file>.llama-logits.f32; llama.cpp also
//    quantizes the activations to 8 bits in its quantized matmuls);
//  - within a per-type distance of the unquantized original's logits.
// A file with a type bicache cannot read (TQ1_0) is refused naming the tensor and the type.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/forward.h"
#include "model/weights.h"
#include "test_util.h"
#include "util/error.h"

namespace bicache::model {
namespace {

using bicache::testing::DataPath;
using bicache::testing::FullLogits;

nlohmann::json Manifest() {
  std::ifstream f(DataPath("llamacpp/manifest.json"));
  return nlohmann::json::parse(f);
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  return testing::MaxAbsDiff(a.data(), b.data(), a.size());
}

float RmsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i] - b[i]) * (a[i] - b[i]);
  return static_cast<float>(std::sqrt(s / a.size()));
}

// Distance to the unquantized original's logits (bicache on random-llada-bf16.gguf). The logits
// have std ~1; random weights make the quantization noise large next to them. Bounds are about
// 1.5x the distances the gguf-py reference forward measures (manifest.json: ref_vs_base_*) plus
// bf16 matmul noise.
struct TypeBound {
  const char* file;
  float max_abs;
  float rms;
};
const TypeBound kBounds[] = {
    {"random-llada-bf16.gguf", 0.0f, 0.0f},     {"random-llada-q8_0.gguf", 0.10f, 0.025f},
    {"random-llada-q6_k.gguf", 0.25f, 0.06f},   {"random-llada-q5_k_m.gguf", 0.40f, 0.10f},
    {"random-llada-q4_k_m.gguf", 0.70f, 0.17f}, {"random-llada-legacy-mix.gguf", 0.70f, 0.17f},
    {"random-llada-q4_0.gguf", 0.80f, 0.21f},   {"random-llada-iq4_xs.gguf", 0.80f, 0.20f},
    {"random-llada-q3_k_m.gguf", 1.30f, 0.36f}, {"random-llada-q2_k.gguf", 2.50f, 0.62f},
};

const TypeBound* BoundFor(const std::string& file) {
  for (const auto& b : kBounds)
    if (file == b.file) return &b;
  return nullptr;
}

TEST(ModelLlamaCppFiles, QuantizedFilesLoadAndMatch) {
  const nlohmann::json man = Manifest();
  const auto toks = man.at("tokens").get<std::vector<int32_t>>();
  auto base_model = Model::Load(DataPath("llamacpp/" + man.at("base").get<std::string>()));
  const std::vector<float> base = FullLogits(*base_model, toks);
  int readable = 0;
  for (const auto& e : man.at("files")) {
    const std::string file = e.at("file");
    if (!e.at("readable").get<bool>()) continue;
    SCOPED_TRACE(file);
    ++readable;
    {
      // The tensor types are llama-quantize's, as the manifest lists them.
      auto gguf = format::GgufFile::Open(DataPath("llamacpp/" + file));
      for (const auto& [name, type] : e.at("tensor_types").items()) {
        const format::TensorInfo* t = gguf.FindTensor(name);
        ASSERT_NE(t, nullptr) << name;
        EXPECT_EQ(format::TensorTypeName(t->type), type.get<std::string>()) << name;
      }
    }
    std::unique_ptr<Model> m;
    ASSERT_NO_THROW(m = Model::Load(DataPath("llamacpp/" + file)));
    ASSERT_EQ(m->config().n_vocab, base_model->config().n_vocab);
    const std::vector<float> got = FullLogits(*m, toks);
    const std::vector<float> ref = bicache::testing::ReadF32File(
        DataPath("llamacpp/" + e.at("ref_logits").get<std::string>()));
    const std::vector<float> llama = bicache::testing::ReadF32File(
        DataPath("llamacpp/" + e.at("llama_logits").get<std::string>()));
    ASSERT_EQ(ref.size(), got.size());
    ASSERT_EQ(llama.size(), got.size());
    const float vs_ref = MaxAbsDiff(got, ref), vs_llama = MaxAbsDiff(got, llama);
    const float vs_base = MaxAbsDiff(got, base), rms_base = RmsDiff(got, base);
    std::printf(
        "  %-30s vs reference %.4f  vs llama.cpp %.4f  vs bf16 original max %.4f rms %.4f\n",
        file.c_str(), vs_ref, vs_llama, vs_base, rms_base);
    // bf16 matmuls on logits of std ~1 (the golden test allows 0.12 on std ~2).
    EXPECT_LT(vs_ref, 0.08f);
    EXPECT_LT(vs_llama, 0.15f);
    const TypeBound* b = BoundFor(file);
    ASSERT_NE(b, nullptr) << "no bound for " << file;
    EXPECT_LE(vs_base, b->max_abs);
    EXPECT_LE(rms_base, b->rms);
  }
  EXPECT_EQ(readable, 10);
}

TEST(ModelLlamaCppFiles, UnreadableTypeIsRefusedByName) {
  const nlohmann::json man = Manifest();
  int checked = 0;
  for (const auto& e : man.at("files")) {
    if (e.at("readable").get<bool>()) continue;
    const std::string file = e.at("file");
    const std::string tensor = e.at("first_unreadable_tensor"),
                      type = e.at("first_unreadable_type");
    SCOPED_TRACE(file);
    try {
      Model::Load(DataPath("llamacpp/" + file));
      ADD_FAILURE() << "loaded a file with a " << type << " tensor";
    } catch (const Error& err) {
      const std::string what = err.what();
      EXPECT_EQ(err.kind(), ErrorKind::kUnsupported) << what;
      EXPECT_NE(what.find(tensor), std::string::npos) << what;
      EXPECT_NE(what.find(type), std::string::npos) << what;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 1);  // random-llada-tq1_0.gguf
}

}  // namespace
}  // namespace bicache::model
