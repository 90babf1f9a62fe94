// Block-wise generation of the block-diffusion models (sdar, fast-dllm-v2, llada2;
// tests/data/block): the engine's cached steps (K/V of finished blocks kept, only the current model
// block computed) give the same tokens as a naive generator that recomputes the whole sequence at
// every step; an exact prefix hit gives the same tokens as a miss and skips the prefix's work; a
// prefix that ends inside a block is reused up to that block only; bad requests get one clear error
// each.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "diffusion/denoiser.h"
#include "engine/engine.h"
#include "engine/request_check.h"
#include "model/forward.h"
#include "model/weights.h"
#include "test_util.h"
#include "util/field_error.h"

namespace bicache::engine {
namespace {

using bicache::testing::DataPath;

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> p(n);
  for (int i = 0; i < n; ++i) p[i] = 3 + (i * 37 + salt * 11) % 250;
  return p;
}

RequestOptions Options(const model::Model& m, std::vector<int32_t> prompt, CacheMode cache,
                       int gen = 16) {
  RequestOptions o;
  o.prompt = std::move(prompt);
  o.prefix_len = 0;
  o.cache = cache;
  o.sampler.gen_length = gen;
  o.sampler.steps = gen;
  o.sampler.mask_id = m.config().mask_token_id;
  return o;
}

// What the published generation code computes, without any cache: the sequence up to the end of
// the current model block, every token in every layer, at every step.
std::vector<int32_t> NaiveBlockGenerate(const model::Model& m, const std::vector<int32_t>& prompt,
                                        int gen) {
  const model::ModelConfig& c = m.config();
  diffusion::SamplerConfig s;
  s.gen_length = gen;
  s.steps = gen;
  s.mask_id = c.mask_token_id;
  s.block_length = c.denoise_block();
  s.block_offset = static_cast<int>(prompt.size()) % s.block_length;
  diffusion::Denoiser d(s, c.n_vocab);
  const int P = static_cast<int>(prompt.size()), B = c.block_length, V = c.n_vocab;
  const int shift = c.shift_logits ? 1 : 0;
  std::vector<float> logits(static_cast<size_t>(gen) * V);
  while (!d.done()) {
    const auto [b, e] = d.current_block();
    const int n = std::min(P + gen, (P + e + B - 1) / B * B);
    std::vector<int32_t> tokens = prompt;
    tokens.insert(tokens.end(), d.canvas().begin(), d.canvas().begin() + (n - P));
    model::SeqPlan plan;
    plan.tokens = tokens;
    plan.logits_begin = P + b - shift;
    plan.logits_end = P + e - shift;
    plan.logits = &logits[static_cast<size_t>(b) * V];
    model::Forward(m, {&plan, 1});
    d.Step(logits.data());
  }
  return d.canvas();
}

class EngineBlock : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { model_ = model::Model::Load(DataPath("block/" + GetParam() + ".gguf")); }
  std::unique_ptr<model::Model> model_;
};

// Prompts of 13 and 16 tokens: the first block is finished by the canvas, or starts clean.
TEST_P(EngineBlock, CachedStepsGiveTheTokensOfFullRecompute) {
  Engine eng(*model_, EngineOptions{});
  for (int P : {13, 16}) {
    const std::vector<int32_t> prompt = Prompt(P, P);
    const RequestResult r = eng.Run(Options(*model_, prompt, CacheMode{}));
    EXPECT_EQ(r.canvas, NaiveBlockGenerate(*model_, prompt, 16)) << "prompt of " << P;
    EXPECT_EQ(r.finish_reason, "length");
    // Every token of the prompt and canvas is computed once per layer after its block is final,
    // plus the steps of its own block: far less than recomputing the sequence at every step.
    const uint64_t full = static_cast<uint64_t>(r.forwards) * (P + 16) * model_->config().n_layer;
    EXPECT_LT(r.token_layers, full / 2) << "prompt of " << P;
  }
}

// Several requests at different blocks and steps in one batch: the same tokens as alone.
TEST_P(EngineBlock, BatchedRequestsGiveTheTokensOfSingleOnes) {
  Engine eng(*model_, EngineOptions{});
  std::vector<std::vector<int32_t>> alone;
  std::vector<std::unique_ptr<Request>> reqs;
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> prompt = Prompt(9 + 5 * i, i);
    alone.push_back(eng.Run(Options(*model_, prompt, CacheMode{}, 8 + 8 * i)).canvas);
    reqs.push_back(eng.Start(Options(*model_, prompt, CacheMode{}, 8 + 8 * i)));
  }
  for (;;) {
    std::vector<Request*> live;
    for (auto& r : reqs)
      if (!r->done()) live.push_back(r.get());
    if (live.empty()) break;
    eng.StepBatch(live);
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(reqs[i]->result().canvas, alone[i]) << "request " << i;
}

// A hit reuses the whole blocks of the declared prefix at every layer, exactly: the same tokens
// as a miss and as no cache, and none of the prefix's token-layers.
TEST_P(EngineBlock, AnExactPrefixHitGivesTheTokensOfAMiss) {
  const int L = model_->config().n_layer, B = model_->config().block_length;
  const std::vector<int32_t> shared = Prompt(24, 7);
  CacheMode prefix;
  prefix.prefix = PrefixReuse::kExact;
  Engine cached(*model_, EngineOptions{});
  Engine plain(*model_, EngineOptions{});
  for (int tail = 0; tail < 3; ++tail) {
    std::vector<int32_t> prompt = shared;
    for (int i = 0; i < 3 + tail; ++i) prompt.push_back(100 + 13 * tail + i);
    RequestOptions o = Options(*model_, prompt, prefix);
    o.prefix_len = 24;
    const RequestResult hit = cached.Run(o);
    const RequestResult none = plain.Run(Options(*model_, prompt, CacheMode{}));
    EXPECT_EQ(hit.canvas, none.canvas) << "tail " << tail;
    EXPECT_EQ(hit.prefix_used, 24 / B * B);
    EXPECT_EQ(hit.depth, L);
    EXPECT_EQ(hit.prefix_hit, tail > 0);  // the first request built the entry
    EXPECT_EQ(none.token_layers - hit.token_layers, static_cast<uint64_t>(24 / B * B) * L)
        << "the prefix is computed once by `none`, never by a hit";
  }
  EXPECT_EQ(cached.cache_stats().prefix_builds, 1u);
}

// A declared prefix that ends inside a model block is reused up to the last whole block only:
// the tokens of that block can still see the request's own tokens.
TEST_P(EngineBlock, APrefixEndingInsideABlockIsReusedToThatBlock) {
  const int B = model_->config().block_length;
  CacheMode prefix;
  prefix.prefix = PrefixReuse::kExact;
  Engine eng(*model_, EngineOptions{});
  Engine plain(*model_, EngineOptions{});
  const std::vector<int32_t> prompt = Prompt(3 * B + 3, 5);
  RequestOptions o = Options(*model_, prompt, prefix);
  o.prefix_len = 2 * B + 1;
  const RequestResult r = eng.Run(o);
  EXPECT_EQ(r.prefix_used, 2 * B);
  EXPECT_EQ(r.canvas, plain.Run(Options(*model_, prompt, CacheMode{})).canvas);
}

TEST_P(EngineBlock, BadRequestsAreRefusedByName) {
  Engine eng(*model_, EngineOptions{});
  const int unit = model_->config().sub_block_length > 0 ? model_->config().sub_block_length
                                                         : model_->config().block_length;
  auto expect_error = [&](RequestOptions o, const std::string& part) {
    try {
      eng.Run(std::move(o));
      ADD_FAILURE() << "expected an error containing: " << part;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expect_error(Options(*model_, Prompt(5, 1), CacheMode{}, unit + 1),
               "denoises blocks of " + std::to_string(unit) + " tokens");
  RequestOptions cfg = Options(*model_, Prompt(5, 1), CacheMode{});
  cfg.sampler.cfg_scale = 1;
  expect_error(cfg, "not supported for block-diffusion models");
  expect_error(Options(*model_, Prompt(5, 1), ParseCacheMode("dual")),
               "keeps the K/V of every finished block");
}

// The one rule for a block model's block length, which the CLI's flag and the API's field both
// go through: 0 or the model's own length gives it, any other names {block_length}.
TEST_P(EngineBlock, ModelBlockLengthIsTheModelsOwn) {
  const model::ModelConfig& c = model_->config();
  const int unit = c.denoise_block();
  EXPECT_EQ(ModelBlockLength(c, 0), unit);
  EXPECT_EQ(ModelBlockLength(c, unit), unit);
  try {
    ModelBlockLength(c, unit * 2);
    FAIL() << "expected a FieldError";
  } catch (const FieldError& e) {
    EXPECT_EQ(e.field(), "block_length");
    EXPECT_NE(std::string(e.what()).find("denoises its own blocks of " + std::to_string(unit)),
              std::string::npos)
        << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineBlock,
                         ::testing::Values("sdar-tiny", "fast-dllm-v2-tiny", "llada2-tiny"));

// The exact mode belongs to block-diffusion models: a bidirectional one says why not.
TEST(EngineBlockModes, ABidirectionalModelRefusesExactPrefixReuse) {
  auto m = model::Model::Load(DataPath("golden/llada-tiny.gguf"));
  Engine eng(*m, EngineOptions{});
  RequestOptions o = Options(*m, Prompt(8, 1), ParseCacheMode("prefix"), 8);
  try {
    eng.Run(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("use bicache"), std::string::npos) << e.what();
  }
}

// The context rule, worded once for every front end: the field to change is the one named first,
// and the code is OpenAI's.
TEST(EngineRequestCheck, ContextErrorsNameTheFieldToChange) {
  auto m = model::Model::Load(DataPath("golden/llada-tiny.gguf"));
  const model::ModelConfig& c = m->config();
  auto one_block = [&](int prompt, int gen) {
    RequestOptions o = Options(*m, std::vector<int32_t>(prompt, 5), CacheMode{}, gen);
    o.sampler.block_length = gen;
    return o;
  };
  auto error_for = [&](int prompt, int gen) -> FieldError {
    try {
      CheckRequest(one_block(prompt, gen), c);
    } catch (const FieldError& e) {
      return e;
    }
    ADD_FAILURE() << "expected a FieldError for prompt " << prompt << " + " << gen;
    return FieldError(ErrorKind::kInternal, "");
  };
  EXPECT_NO_THROW(CheckRequest(one_block(c.context_length - 8, 8), c));
  const FieldError over = error_for(c.context_length - 8, 16);
  EXPECT_EQ(over.field(), "gen_length");
  EXPECT_EQ(over.code(), "context_length_exceeded");
  EXPECT_NE(
      std::string(over.what())
          .find(std::to_string(c.context_length - 8) + " in the prompt, 16 for the completion"),
      std::string::npos)
      << over.what();
  const FieldError full = error_for(c.context_length, 1);
  EXPECT_EQ(full.field(), "prompt");
  EXPECT_EQ(full.code(), "context_length_exceeded");
  RequestOptions topk = one_block(4, 8);
  topk.sampler.top_k = c.n_vocab + 1;
  EXPECT_THROW(CheckRequest(topk, c), FieldError);
}

}  // namespace
}  // namespace bicache::engine
