// The block-diffusion architectures (sdar, fast-dllm-v2): the forward against an independent
// PyTorch reference (tools/reference/make_block_golden.py), the block-causal mask's consequences
// (a prefix's K/V computed alone are exact inside a longer request; a change inside a block
// leaves every earlier block untouched), the traits table, and one clear error per bad file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "kernels/int8_gemm.h"
#include "model/forward.h"
#include "model/weights.h"
#include "test_util.h"

namespace bicache::model {
namespace {

using bicache::testing::DataPath;
using bicache::testing::FullLogits;
using bicache::testing::MaxAbsDiff;

nlohmann::json Golden() {
  std::ifstream f(DataPath("block/block_golden.json"));
  return nlohmann::json::parse(f);
}

// Same tolerance as the dense golden files (model_forward_test.cpp): bf16 matmuls with f32
// accumulation, Q8_0 on the int8 route a little looser.
float Tolerance(const Model& m) {
  const bool int8 = m.layers()[0].w_up.storage_type() == format::TensorType::Q8_0 &&
                    kernels::Int8RouteAvailable();
  return int8 ? 0.2f : 0.12f;
}

TEST(ModelBlock, EveryGoldenFileMatchesTheReference) {
  const nlohmann::json golden = Golden();
  ASSERT_EQ(golden.at("models").size(), 6u);
  std::set<std::string> archs;
  for (const auto& g : golden.at("models")) {
    SCOPED_TRACE(g["file"].get<std::string>());
    auto m = Model::Load(DataPath("block/" + g["file"].get<std::string>()));
    archs.insert(ArchName(m->config().arch));
    const auto toks = g["tokens"].get<std::vector<int32_t>>();
    const int V = g["n_vocab"];
    ASSERT_EQ(m->config().n_vocab, V);
    EXPECT_EQ(m->config().shift_logits, g["shift_logits"].get<bool>());
    EXPECT_EQ(m->config().block_length, g["config"]["block_length"].get<int>());
    const std::vector<float> ref =
        bicache::testing::ReadF32File(DataPath("block/" + g["logits"].get<std::string>()));
    ASSERT_EQ(ref.size(), toks.size() * V);
    const std::vector<float> got = FullLogits(*m, toks);  // 70 rows: the oneDNN attention path
    const float err = MaxAbsDiff(got.data(), ref.data(), ref.size());
    std::printf("  %s: max abs error %.4f\n", g["file"].get<std::string>().c_str(), err);
    EXPECT_LT(err, Tolerance(*m));
    // The top token agrees on every row where the reference's top two are further apart than
    // twice the tolerance (random weights leave some rows with near-ties either way may break).
    for (size_t r = 0; r < toks.size(); ++r) {
      const float* a = &got[r * V];
      std::vector<float> b(&ref[r * V], &ref[(r + 1) * V]);
      const size_t want = std::max_element(b.begin(), b.end()) - b.begin();
      std::vector<float> sorted = b;
      std::nth_element(sorted.begin(), sorted.begin() + 1, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] <= 2 * Tolerance(*m)) continue;
      EXPECT_EQ(static_cast<size_t>(std::max_element(a, a + V) - a), want) << "row " << r;
    }
    // A sequence cut at a block boundary gives the reference's rows before the cut: rows never
    // see a later block. 16 rows take the few-row attention path, 40 the tiled one.
    for (size_t cut : {16u, 40u}) {
      const std::vector<int32_t> head(toks.begin(), toks.begin() + cut);
      const std::vector<float> part = FullLogits(*m, head);
      EXPECT_LT(MaxAbsDiff(part.data(), ref.data(), part.size()), Tolerance(*m)) << "cut " << cut;
    }
  }
  EXPECT_EQ(archs, (std::set<std::string>{"sdar", "fast-dllm-v2"}));
}

TEST(ModelBlock, TraitsOfTheNewArchitectures) {
  auto sdar = Model::Load(DataPath("block/sdar-tiny.gguf"));
  const ModelConfig& s = sdar->config();
  EXPECT_EQ(s.arch, Arch::kSdar);
  EXPECT_TRUE(s.block_causal());
  EXPECT_TRUE(s.qk_norm);
  EXPECT_FALSE(s.qkv_bias);
  EXPECT_FALSE(s.shift_logits);
  EXPECT_EQ(s.rope_layout, kernels::RopeLayout::kNeox);
  EXPECT_EQ(s.block_length, 4);
  EXPECT_EQ(s.sub_block_length, 0);
  EXPECT_EQ(s.head_dim, 32);
  EXPECT_LT(s.n_kv_head, s.n_head);
  EXPECT_EQ(sdar->layers()[0].k_norm.size(), 32u);
  auto fd = Model::Load(DataPath("block/fast-dllm-v2-tiny.gguf"));
  const ModelConfig& f = fd->config();
  EXPECT_EQ(f.arch, Arch::kFastDllmV2);
  EXPECT_TRUE(f.block_causal());
  EXPECT_FALSE(f.qk_norm);
  EXPECT_TRUE(f.qkv_bias);
  EXPECT_TRUE(f.shift_logits);
  EXPECT_EQ(f.block_length, 8);
  EXPECT_EQ(f.sub_block_length, 4);
  EXPECT_EQ(fd->layers()[1].bv.size(), static_cast<size_t>(f.kv_dim()));
  // Every architecture has a traits row under its own name.
  for (Arch a : {Arch::kLlada, Arch::kDream, Arch::kLladaMoe, Arch::kRnd1, Arch::kSdar,
                 Arch::kFastDllmV2, Arch::kLlada2}) {
    EXPECT_EQ(TraitsOf(a).arch, a);
    ASSERT_NE(FindArch(ArchName(a)), nullptr);
    EXPECT_EQ(FindArch(ArchName(a))->arch, a);
  }
  EXPECT_EQ(FindArch("qwen3"), nullptr);
  EXPECT_EQ(TensorName(TensorId::kAttnQNorm, 3), "blk.3.attn_q_norm.weight");
  EXPECT_EQ(TensorName(TensorId::kOutput), "output.weight");
}

class BlockForwardTest : public ::testing::TestWithParam<std::string> {};

// The K/V of a prefix of whole blocks, computed from the prefix alone, are exactly those the
// prefix has inside any longer request: a forward computing only the tail against them gives the
// full forward's logits. (For a bidirectional model they differ: BiCache's approximation.)
TEST_P(BlockForwardTest, PrefixKvComputedAloneIsExactInALongerRequest) {
  auto m = Model::Load(DataPath("block/" + GetParam()));
  const ModelConfig& c = m->config();
  const auto all = Golden()["models"][0]["tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> toks(all.begin(), all.begin() + 40);
  const int n = 40, V = c.n_vocab, P = 24;  // 24: a whole number of blocks of 4 and of 8
  const std::vector<float> full = FullLogits(*m, toks);
  SeqKv prefix_kv;
  FullLogits(*m, std::vector<int32_t>(toks.begin(), toks.begin() + P), &prefix_kv);
  SeqKv kv;  // the prefix rows, as a cache would hold them; the rest is never read
  kv.Reset(c.n_layer, n);
  for (int l = 0; l < c.n_layer; ++l) {
    kv.layers[l] = prefix_kv.layers[l];
    kv.layers[l].k.resize(static_cast<size_t>(n) * c.kv_dim());
    kv.layers[l].v.resize(static_cast<size_t>(n) * c.kv_dim());
  }
  for (auto [cb, ce] : {std::pair{P, n}, std::pair{P, P + 8}}) {
    SCOPED_TRACE("computed " + std::to_string(cb) + ".." + std::to_string(ce));
    std::vector<float> out(static_cast<size_t>(ce - cb) * V);
    SeqPlan p;
    p.tokens = toks;
    p.partial_depth = c.n_layer;
    p.compute_begin = cb;
    p.compute_end = ce;
    p.kv_in = &kv;
    p.logits_begin = cb;
    p.logits_end = ce;
    p.logits = out.data();
    if (ce < n) {  // a middle window also reads the cached rows after it: give it the full K/V
      SeqKv all_kv;
      FullLogits(*m, toks, &all_kv);
      for (int l = 0; l < c.n_layer; ++l) {
        std::copy(all_kv.layers[l].k.begin() + static_cast<size_t>(ce) * c.kv_dim(),
                  all_kv.layers[l].k.end(),
                  kv.layers[l].k.begin() + static_cast<size_t>(ce) * c.kv_dim());
        std::copy(all_kv.layers[l].v.begin() + static_cast<size_t>(ce) * c.kv_dim(),
                  all_kv.layers[l].v.end(),
                  kv.layers[l].v.begin() + static_cast<size_t>(ce) * c.kv_dim());
      }
    }
    Forward(*m, {&p, 1});
    EXPECT_LT(MaxAbsDiff(out.data(), &full[static_cast<size_t>(cb) * V], out.size()), 1e-3f);
  }
}

// A token changed inside block b changes the rows of block b and later, never an earlier row.
TEST_P(BlockForwardTest, AChangeInsideABlockLeavesEarlierBlocksUntouched) {
  auto m = Model::Load(DataPath("block/" + GetParam()));
  const int B = m->config().block_length, V = m->config().n_vocab;
  std::vector<int32_t> a = Golden()["models"][0]["tokens"].get<std::vector<int32_t>>();
  a.resize(40);
  std::vector<int32_t> b = a;
  const int changed = 2 * B + 1;  // inside the third block
  b[changed] = (b[changed] + 17) % V;
  const auto la = FullLogits(*m, a), lb = FullLogits(*m, b);
  const size_t before = static_cast<size_t>(2 * B) * V;
  EXPECT_EQ(MaxAbsDiff(la.data(), lb.data(), before), 0.0f);
  EXPECT_GT(MaxAbsDiff(&la[before], &lb[before], static_cast<size_t>(B) * V), 1e-3f);
}

INSTANTIATE_TEST_SUITE_P(Block, BlockForwardTest,
                         ::testing::Values("sdar-tiny.gguf", "fast-dllm-v2-tiny.gguf",
                                           "llada2-tiny.gguf"),
                         [](const auto& info) {
                           std::string s = info.param.substr(0, info.param.find("-tiny"));
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// ---- bad files ----

// The fixture `file` rewritten without the metadata keys in `drop_keys` and the tensors in
// `drop_tensors`, with `set` applied, loaded from memory.
std::unique_ptr<Model> LoadEdited(const std::string& file, const std::set<std::string>& drop_keys,
                                  const std::set<std::string>& drop_tensors,
                                  const std::function<void(format::GgufWriter&)>& set = {}) {
  const format::GgufFile src = format::GgufFile::Open(DataPath("block/" + file));
  format::GgufWriter w;
  for (const auto& [key, value] : src.metadata()) {
    if (key != "general.alignment" && !drop_keys.count(key)) w.SetValue(key, value);
  }
  if (set) set(w);
  for (const auto& t : src.tensors()) {
    if (drop_tensors.count(t.name)) continue;
    w.AddTensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  const std::vector<uint8_t> bytes = w.ToBytes();
  return Model::FromFile(format::GgufFile::FromBytes(bytes));
}

void ExpectError(const std::function<void()>& load, const std::string& needle) {
  try {
    load();
    FAIL() << "expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kModel) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

auto SetU32(const char* key, uint32_t v) {
  return [key, v](format::GgufWriter& w) { w.SetValue(key, format::Value::U32(v)); };
}

TEST(ModelBlock, TheFixturesRewrittenUnchangedStillLoad) {
  EXPECT_EQ(LoadEdited("sdar-tiny.gguf", {}, {})->config().block_length, 4);
  EXPECT_EQ(LoadEdited("fast-dllm-v2-tiny.gguf", {}, {})->config().sub_block_length, 4);
}

TEST(ModelBlock, BadFilesGetOneClearErrorEach) {
  const std::string sdar = "sdar-tiny.gguf", fd = "fast-dllm-v2-tiny.gguf";
  ExpectError([&] { LoadEdited(sdar, {"diffusion.block_length"}, {}); },
              "metadata key 'diffusion.block_length' is missing: sdar is a block-diffusion model");
  ExpectError([&] { LoadEdited(sdar, {}, {}, SetU32("diffusion.block_length", 0)); },
              "'diffusion.block_length' = 0 is out of range");
  ExpectError([&] { LoadEdited(sdar, {}, {}, SetU32("diffusion.block_length", 24)); },
              "'diffusion.block_length' = 24 does not divide the context length 512");
  ExpectError([&] { LoadEdited(fd, {"diffusion.sub_block_length"}, {}); },
              "'diffusion.sub_block_length' is missing");
  ExpectError([&] { LoadEdited(fd, {}, {}, SetU32("diffusion.sub_block_length", 3)); },
              "'diffusion.sub_block_length' = 3 does not divide diffusion.block_length = 8");
  ExpectError([&] { LoadEdited(sdar, {"tokenizer.ggml.mask_token_id"}, {}); },
              "'tokenizer.ggml.mask_token_id' is missing");
  ExpectError([&] { LoadEdited(fd, {}, {"blk.1.attn_k.bias"}); },
              "tensor 'blk.1.attn_k.bias' is missing: fast-dllm-v2 has Q/K/V projection biases");
  ExpectError([&] { LoadEdited(sdar, {}, {"blk.0.attn_q_norm.weight"}); },
              "tensor 'blk.0.attn_q_norm.weight' is missing: sdar normalises Q and K per head");
}

}  // namespace
}  // namespace bicache::model
