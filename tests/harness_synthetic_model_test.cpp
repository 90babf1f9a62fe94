// The in-memory random-weight model used by `bench-forward`: it loads through the normal GGUF
// path, its configuration is the spec's, and a forward gives finite logits of the right shape.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/synthetic_model.h"
#include "model/forward.h"
#include "util/error.h"

namespace bicache::harness {
namespace {

SyntheticSpec Tiny() {
  SyntheticSpec s;
  s.d_model = 64;
  s.n_head = 4;
  s.n_kv_head = 2;
  s.d_ff = 96;
  s.n_layer = 2;
  s.n_vocab = 50;
  s.context_length = 128;
  return s;
}

TEST(HarnessSyntheticModel, ConfigMatchesTheSpec) {
  const SyntheticSpec s = Tiny();
  auto m = MakeSyntheticLlada(s);
  const model::ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, model::Arch::kLlada);
  EXPECT_EQ(c.d_model, s.d_model);
  EXPECT_EQ(c.n_head, s.n_head);
  EXPECT_EQ(c.n_kv_head, s.n_kv_head);
  EXPECT_EQ(c.head_dim, s.d_model / s.n_head);
  EXPECT_EQ(c.d_ff, s.d_ff);
  EXPECT_EQ(c.n_layer, s.n_layer);
  EXPECT_EQ(c.n_vocab, s.n_vocab);
  EXPECT_EQ(c.context_length, s.context_length);
  EXPECT_EQ(c.mask_token_id, s.n_vocab - 1);
  EXPECT_FALSE(c.shift_logits);
  ASSERT_EQ(m->layers().size(), static_cast<size_t>(s.n_layer));
  EXPECT_EQ(m->layers()[0].w_gate.out(), static_cast<size_t>(s.d_ff));
  EXPECT_EQ(m->output().out(), static_cast<size_t>(s.n_vocab));
}

TEST(HarnessSyntheticModel, ForwardGivesFiniteLogitsOfTheRightShape) {
  auto m = MakeSyntheticLlada(Tiny());
  const int V = m->config().n_vocab;
  const std::vector<int32_t> toks = {1, 5, 7, 49, 0, 3, 3, 12, 30};
  const int n = static_cast<int>(toks.size());
  // One guard row past the requested rows checks nothing is written beyond them.
  std::vector<float> logits(static_cast<size_t>(n + 1) * V, -12345.0f);
  model::SeqPlan p;
  p.tokens = toks;
  p.logits_begin = 0;
  p.logits_end = n;
  p.logits = logits.data();
  model::ForwardStats st;
  model::Forward(*m, {&p, 1}, &st);
  bool all_finite = true, varies = false;
  for (size_t i = 0; i < static_cast<size_t>(n) * V; ++i) {
    all_finite &= std::isfinite(logits[i]);
    varies |= logits[i] != logits[0];
  }
  EXPECT_TRUE(all_finite);
  EXPECT_TRUE(varies);
  for (int i = 0; i < V; ++i) EXPECT_EQ(logits[static_cast<size_t>(n) * V + i], -12345.0f);
  EXPECT_EQ(st.token_layers, static_cast<uint64_t>(n) * 2);
  EXPECT_GT(st.matmul_flops, 0);
  EXPECT_GT(st.attention_flops, 0);
}

TEST(HarnessSyntheticModel, SameSeedSameWeightsAndQuantisedTypesLoad) {
  SyntheticSpec s = Tiny();
  auto a = MakeSyntheticLlada(s), b = MakeSyntheticLlada(s);
  std::vector<float> ea(s.d_model), eb(s.d_model);
  a->Embed(7, ea.data());
  b->Embed(7, eb.data());
  EXPECT_EQ(ea, eb);
  s.matrix_type = format::TensorType::Q8_0;
  EXPECT_EQ(MakeSyntheticLlada(s)->config().d_model, s.d_model);
}

TEST(HarnessSyntheticModel, InconsistentSpecIsAnInvalidArgument) {
  SyntheticSpec s = Tiny();
  s.n_head = 5;  // 64 is not a multiple of 5
  try {
    MakeSyntheticLlada(s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

}  // namespace
}  // namespace bicache::harness
