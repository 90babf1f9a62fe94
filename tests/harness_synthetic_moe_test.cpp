// The synthetic mixture-of-experts model (SyntheticSpec with experts): it loads as llada-moe with
// the spec's expert shape, and a forward's matmul FLOPs are those of the ACTIVE parameters only
// (attention projections, router, the top-k experts per token, the output head).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/synthetic_model.h"
#include "model/forward.h"

namespace bicache::harness {
namespace {

SyntheticSpec TinyMoe() {
  SyntheticSpec s;
  s.d_model = 64;
  s.n_head = 4;
  s.n_kv_head = 2;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.d_ff_exp = 32;
  s.n_layer = 2;
  s.n_vocab = 50;
  s.context_length = 128;
  return s;
}

TEST(HarnessSyntheticMoe, LoadsAsLladaMoeWithTheSpecsExperts) {
  const SyntheticSpec s = TinyMoe();
  auto m = MakeSyntheticLlada(s);
  const model::ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, model::Arch::kLladaMoe);
  EXPECT_EQ(c.n_expert, s.n_expert);
  EXPECT_EQ(c.n_expert_used, s.n_expert_used);
  EXPECT_EQ(c.d_ff_exp, s.d_ff_exp);
  EXPECT_TRUE(c.qk_norm);
  ASSERT_EQ(m->layers().size(), static_cast<size_t>(s.n_layer));
  EXPECT_EQ(m->layers()[1].exp_down.size(), static_cast<size_t>(s.n_expert));
  EXPECT_EQ(m->layers()[1].q_norm.size(), static_cast<size_t>(c.head_dim));
}

TEST(HarnessSyntheticMoe, ForwardFlopsCountTheActiveParameters) {
  const SyntheticSpec s = TinyMoe();
  auto m = MakeSyntheticLlada(s);
  const std::vector<int32_t> toks = {1, 5, 7, 49, 0, 3, 3, 12, 30};
  const double n = static_cast<double>(toks.size());
  std::vector<float> logits(toks.size() * s.n_vocab);
  model::SeqPlan p;
  p.tokens = toks;
  p.logits_begin = 0;
  p.logits_end = static_cast<int>(toks.size());
  p.logits = logits.data();
  model::ForwardStats st;
  model::Forward(*m, {&p, 1}, &st);

  const double d = s.d_model, kv = d / s.n_head * s.n_kv_head;
  const double attention = d * d + 2 * d * kv + d * d;            // Q, K, V, O
  const double router = d * s.n_expert;                           // every expert scored
  const double experts = s.n_expert_used * 3.0 * d * s.d_ff_exp;  // top-k only
  const double per_token = s.n_layer * (attention + router + experts) + d * s.n_vocab;  // + head
  EXPECT_DOUBLE_EQ(st.matmul_flops, 2.0 * n * per_token);
  bool finite = true;
  for (float v : logits) finite &= std::isfinite(v);
  EXPECT_TRUE(finite);
}

}  // namespace
}  // namespace bicache::harness
