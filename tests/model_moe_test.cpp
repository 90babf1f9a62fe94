// The llada-moe and rnd1 architectures: logits against the independent PyTorch reference
// (tools/reference/make_moe_golden.py), routing, batching and partial plans, and one clear load
// error per way the expert metadata or tensors can disagree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "kernels/int8_gemm.h"
#include "model/forward.h"
#include "model/moe.h"
#include "model/weights.h"
#include "test_util.h"

namespace bicache::model {
namespace {

using bicache::testing::DataPath;
using bicache::testing::FullLogits;

float MaxAbsDiff(const std::vector<float>& a, const float* b) {
  return testing::MaxAbsDiff(a.data(), b, a.size());
}

TEST(ModelMoe, GoldenFilesMatchTheReference) {
  std::ifstream f(DataPath("moe/moe_golden.json"));
  const nlohmann::json golden = nlohmann::json::parse(f);
  ASSERT_EQ(golden.at("models").size(), 5u);  // llada-moe f32, f16, bf16, q8_0; rnd1 f32
  for (const auto& g : golden.at("models")) {
    SCOPED_TRACE(g["file"].get<std::string>());
    auto m = Model::Load(DataPath("moe/" + g["file"].get<std::string>()));
    const ModelConfig& c = m->config();
    const nlohmann::json& gc = g["config"];
    EXPECT_EQ(ArchName(c.arch), g["arch"].get<std::string>());
    EXPECT_EQ(c.n_expert, gc["n_expert"].get<int>());
    EXPECT_EQ(c.n_expert_used, gc["n_expert_used"].get<int>());
    EXPECT_EQ(c.d_ff_exp, gc["ff_exp"].get<int>());
    EXPECT_EQ(c.head_dim, gc.value("head_dim", c.d_model / c.n_head));
    EXPECT_EQ(c.expert_weights_norm, g["renormalised"].get<bool>());
    EXPECT_EQ(c.shift_logits, g["shift_logits"].get<bool>());
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.rope_layout, kernels::RopeLayout::kNeox);
    const auto toks = g["tokens"].get<std::vector<int32_t>>();
    const int V = g["n_vocab"];
    const std::vector<float> ref =
        bicache::testing::ReadF32File(DataPath("moe/" + g["logits"].get<std::string>()));
    ASSERT_EQ(ref.size(), toks.size() * V);
    const std::vector<float> got = FullLogits(*m, toks);
    const float err = MaxAbsDiff(got, ref.data());
    // The dense golden files' bounds: bf16 matmuls on logits of std ~2; Q8_0 experts on the int8
    // route also round activations to 8 bits per 32-block.
    const bool int8 = m->layers()[0].exp_up[0].storage_type() == format::TensorType::Q8_0 &&
                      kernels::Int8RouteAvailable();
    std::printf("  %s: max abs error %.4f%s\n", g["file"].get<std::string>().c_str(), err,
                int8 ? " (int8 route)" : "");
    EXPECT_LT(err, int8 ? 0.2f : 0.12f);
    int agree = 0;
    for (size_t r = 0; r < toks.size(); ++r) {
      const float* a = &got[r * V];
      const float* b = &ref[r * V];
      agree += (std::max_element(a, a + V) - a) == (std::max_element(b, b + V) - b);
    }
    EXPECT_GE(agree, static_cast<int>(toks.size()) - 1);
  }
}

TEST(ModelMoe, RouterTakesTheTopKProbabilities) {
  // Two rows over 4 experts: probabilities softmax(logits), the 2 largest kept as they are.
  std::vector<float> logits = {0.f, 2.f, 1.f, -1.f, 3.f, 3.f, 0.f, 5.f};
  std::vector<float> expect_p(8);
  for (int r = 0; r < 2; ++r) {
    float s = 0;
    for (int e = 0; e < 4; ++e) s += std::exp(logits[r * 4 + e]);
    for (int e = 0; e < 4; ++e) expect_p[r * 4 + e] = std::exp(logits[r * 4 + e]) / s;
  }
  std::vector<float> l = logits;
  int ids[4];
  float w[4];
  RouteTopK(l.data(), 2, 4, 2, false, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], 3);
  EXPECT_EQ(ids[3], 0);  // a tie (experts 0 and 1 at 3.0) goes to the lower id
  EXPECT_NEAR(w[0], expect_p[1], 1e-5);
  EXPECT_NEAR(w[1], expect_p[2], 1e-5);
  EXPECT_NEAR(w[3], expect_p[4], 1e-5);
  l = logits;
  RouteTopK(l.data(), 2, 4, 2, true, ids, w);  // RND1-style: chosen weights sum to 1
  EXPECT_NEAR(w[0] + w[1], 1.0f, 1e-6);
  EXPECT_NEAR(w[0] / w[1], expect_p[1] / expect_p[2], 1e-4);
}

// Rows of different sequences are grouped by expert together; each sequence must still get the
// logits it gets alone, and a partial plan with exact cached K/V must equal the full forward.
TEST(ModelMoe, BatchAndPartialPlansMatchTheFullForward) {
  auto m = Model::Load(DataPath("moe/llada-moe-tiny.gguf"));
  const int V = m->config().n_vocab;
  std::vector<int32_t> a = {1, 5, 9, 33, 7, 7, 2, 44, 45, 46, 299, 299}, b = {4, 100, 250};
  SeqKv full_kv;
  const auto la = FullLogits(*m, a, &full_kv), lb = FullLogits(*m, b);
  std::vector<float> oa(a.size() * V), ob(b.size() * V);
  SeqPlan plans[2];
  plans[0].tokens = a;
  plans[0].logits_end = static_cast<int>(a.size());
  plans[0].logits = oa.data();
  plans[1].tokens = b;
  plans[1].logits_end = static_cast<int>(b.size());
  plans[1].logits = ob.data();
  Forward(*m, plans);
  EXPECT_LT(MaxAbsDiff(oa, la.data()), 1e-4f);
  EXPECT_LT(MaxAbsDiff(ob, lb.data()), 1e-4f);

  const int n = static_cast<int>(a.size()), cb = 5;
  std::vector<float> out(static_cast<size_t>(n - cb) * V);
  SeqPlan p;
  p.tokens = a;
  p.partial_depth = 1;  // BiCache at depth 1: layer 0 computes only [cb, n)
  p.compute_begin = cb;
  p.kv_in = &full_kv;
  p.logits_begin = cb;
  p.logits_end = n;
  p.logits = out.data();
  Forward(*m, {&p, 1});
  EXPECT_LT(MaxAbsDiff(out, &la[static_cast<size_t>(cb) * V]), 1e-3f);
}

// The fixture rewritten with `edit` applied to its metadata and tensors, loaded from memory.
using Edit = std::function<void(format::GgufWriter&)>;
std::unique_ptr<Model> LoadEdited(
    const Edit& set_values,
    const std::function<bool(const format::TensorInfo&, format::GgufWriter&)>& replace) {
  const format::GgufFile src = format::GgufFile::Open(DataPath("moe/llada-moe-tiny.gguf"));
  format::GgufWriter w;
  for (const auto& [key, value] : src.metadata()) {
    if (key != "general.alignment") w.SetValue(key, value);
  }
  set_values(w);
  for (const auto& t : src.tensors()) {
    if (replace && replace(t, w)) continue;
    w.AddTensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  const std::vector<uint8_t> bytes = w.ToBytes();
  return Model::FromFile(format::GgufFile::FromBytes(bytes));
}

void ExpectModelError(
    const Edit& set_values,
    const std::function<bool(const format::TensorInfo&, format::GgufWriter&)>& replace,
    const std::string& needle) {
  try {
    LoadEdited(set_values, replace);
    FAIL() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kModel) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Replaces tensor `name` by a zero F32 tensor of shape `ne`.
std::function<bool(const format::TensorInfo&, format::GgufWriter&)> Reshape(
    std::string name, std::vector<uint64_t> ne) {
  return [name, ne](const format::TensorInfo& t, format::GgufWriter& w) {
    if (t.name != name) return false;
    uint64_t n = 1;
    for (uint64_t v : ne) n *= v;
    w.AddTensorF32(name, ne, std::vector<float>(n, 0.0f));
    return true;
  };
}

TEST(ModelMoe, TheFixtureRewrittenUnchangedStillLoads) {
  EXPECT_EQ(LoadEdited([](format::GgufWriter&) {}, nullptr)->config().n_expert, 4);
}

TEST(ModelMoe, BadExpertMetadataAndTensorsGetOneClearErrorEach) {
  auto set = [](const char* key, uint32_t v) {
    return [key, v](format::GgufWriter& w) { w.SetValue(key, format::Value::U32(v)); };
  };
  ExpectModelError(set("llada-moe.expert_count", 0), nullptr, "'llada-moe.expert_count' is 0");
  ExpectModelError(set("llada-moe.expert_used_count", 5), nullptr,
                   "'llada-moe.expert_used_count' = 5 exceeds expert_count = 4");
  ExpectModelError([](format::GgufWriter&) {}, Reshape("blk.1.ffn_up_exps.weight", {64, 32, 3}),
                   "tensor 'blk.1.ffn_up_exps.weight' holds 3 experts (its third dimension), "
                   "but expert_count is 4");
  ExpectModelError([](format::GgufWriter&) {}, Reshape("blk.0.ffn_gate_inp.weight", {64, 5}),
                   "tensor 'blk.0.ffn_gate_inp.weight' routes to 5 experts");
  ExpectModelError(
      [](format::GgufWriter&) {}, Reshape("blk.0.ffn_down_exps.weight", {64, 32, 4}),
      "tensor 'blk.0.ffn_down_exps.weight' has shape [64, 32, 4], expected [32, 64, 4]");
}

}  // namespace
}  // namespace bicache::model
