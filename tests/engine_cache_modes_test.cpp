// Cache modes end to end on a small llada file: the identities the modes must satisfy, pins that
// never leak, eviction under a tiny budget, and batch-independence of a request's output.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/loaded_model.h"
#include "test_util.h"

namespace bicache::engine {
namespace {

using bicache::testing::DataPath;

class EngineModesTest : public ::testing::Test {
 protected:
  void SetUp() override { lm_ = LoadedModel::Load(DataPath("golden/llada-tiny.gguf")); }

  RequestOptions Options(const std::string& system, const std::string& user,
                         const std::string& mode) {
    Prompt p = lm_->ChatPrompt({{"system", system}, {"user", user}});
    RequestOptions o;
    o.prompt = p.tokens;
    o.prefix_len = p.prefix_len;
    o.sampler.gen_length = 8;
    o.sampler.steps = 8;
    o.sampler.block_length = 8;
    o.sampler.stop_ids = lm_->stop_ids();
    o.cache = ParseCacheMode(mode);
    return o;
  }
  std::vector<int32_t> Run(Engine& e, const RequestOptions& o) { return e.Run(o).canvas; }

  std::unique_ptr<LoadedModel> lm_;
  const std::string system_ =
      "You answer questions about a long shared document that many requests read.";
};

TEST_F(EngineModesTest, FixedZeroEqualsNoneAndFixedAllLayersEqualsLlm) {
  Engine e(lm_->model(), {});
  const int L = lm_->model().config().n_layer;
  for (const std::string q : {"first question?", "another one"}) {
    const auto none = Run(e, Options(system_, q, "none"));
    EXPECT_EQ(Run(e, Options(system_, q, "fixed:0")), none);
    // Twice: a miss (entry built) and a hit must both equal the llm mode's answer.
    const auto llm = Run(e, Options(system_, q, "llm"));
    EXPECT_EQ(Run(e, Options(system_, q, "fixed:" + std::to_string(L))), llm);
    EXPECT_EQ(Run(e, Options(system_, q, "fixed:" + std::to_string(L))), llm);
  }
  EXPECT_GT(e.cache_stats().total.hits, 0u);
}

TEST_F(EngineModesTest, PrefixReuseReportsDepthAndHits) {
  Engine e(lm_->model(), {});
  RequestResult first = e.Run(Options(system_, "q one", "fixed:1"));
  RequestResult second = e.Run(Options(system_, "q two", "fixed:1"));
  EXPECT_EQ(first.depth, 1);
  EXPECT_FALSE(first.prefix_hit);
  EXPECT_TRUE(second.prefix_hit);
  EXPECT_GT(second.prefix_used, 0);
  // Computing fewer prefix tokens in layer 0 shows up as fewer token-layers.
  RequestResult none = e.Run(Options(system_, "q two", "none"));
  EXPECT_LT(second.token_layers, none.token_layers);
}

TEST_F(EngineModesTest, EmptyDepthTableMeansNoReuseNotACrash) {
  Engine e(lm_->model(), {});
  RequestResult r = e.Run(Options(system_, "q", "bicache"));
  EXPECT_EQ(r.depth, 0);
  EXPECT_EQ(r.canvas, Run(e, Options(system_, "q", "none")));
}

TEST_F(EngineModesTest, BicacheUsesTheTableDepthForTheRatio) {
  EngineOptions eo;
  CalibrationBin bin{0, 1, {0.999, 0.999}, {}, {}};  // both layers safe at every ratio
  eo.depth_table = DepthTable::FromBins({bin}, 0.97, lm_->model().config().n_layer);
  Engine e(lm_->model(), std::move(eo));
  RequestResult r = e.Run(Options(system_, "q", "bicache"));
  EXPECT_EQ(r.depth, 2);
  EXPECT_EQ(r.canvas, Run(e, Options(system_, "q", "fixed:2")));
  // Only layer 0 similar: depth 1 would rejoin at layer 1 with prefix-alone K/V there, so no reuse.
  EngineOptions eo0;
  eo0.depth_table =
      DepthTable::FromBins({{0, 1, {0.999, 0.5}, {}, {}}}, 0.97, lm_->model().config().n_layer);
  Engine e0(lm_->model(), std::move(eo0));
  EXPECT_EQ(e0.Run(Options(system_, "q", "bicache")).depth, 0);
}

TEST_F(EngineModesTest, PinsReturnToZeroWhenRequestsAreCancelled) {
  Engine e(lm_->model(), {});
  for (int i = 0; i < 12; ++i) {
    auto req = e.Start(
        Options(system_ + std::to_string(i % 3), "question " + std::to_string(i), "fixed:1"));
    EXPECT_GT(e.cache_stats().total.bytes_pinned, 0u);
    // Every other request is cancelled after one step (dropped), the rest finish.
    Request* r = req.get();
    e.StepBatch({&r, 1});
    if (i % 2 == 0) continue;
    while (!req->done()) e.StepBatch({&r, 1});
  }
  EXPECT_EQ(e.cache_stats().total.bytes_pinned, 0u);
  EXPECT_GT(e.cache_stats().total.entries, 0u);
}

TEST_F(EngineModesTest, TinyBudgetEvictsButAnswersStayCorrect) {
  Engine big(lm_->model(), {});
  EngineOptions small_opts;
  small_opts.cache_budget_bytes = 1;  // nothing fits: every request runs uncached
  Engine small(lm_->model(), std::move(small_opts));
  for (int i = 0; i < 4; ++i) {
    const auto o = Options(system_ + std::to_string(i), "q", "fixed:1");
    RequestResult a = big.Run(o), b = small.Run(o);
    EXPECT_EQ(b.depth, 0);
    EXPECT_EQ(b.canvas, Run(big, Options(system_ + std::to_string(i), "q", "none")));
    EXPECT_EQ(a.depth, 1);
  }
  EXPECT_EQ(small.cache_stats().total.bytes_used, 0u);
  EXPECT_GT(small.cache_stats().insert_failures, 0u);
}

TEST_F(EngineModesTest, OneBudgetIsSharedByEveryDepthStore) {
  // Measure one entry of each depth, then give the engine room for about one and a half.
  Engine probe(lm_->model(), {});
  probe.Run(Options(system_, "q", "fixed:1"));
  const size_t one = probe.cache_stats().total.bytes_used;
  probe.Run(Options(system_, "q", "fixed:2"));
  const size_t two = probe.cache_stats().total.bytes_used - one;
  ASSERT_GT(one, 0u);
  ASSERT_GT(two, one);
  const size_t budget = two + one / 2;
  EngineOptions eo;
  eo.cache_budget_bytes = budget;
  Engine e(lm_->model(), std::move(eo));
  for (int i = 0; i < 6; ++i) {
    const std::string mode = i % 2 ? "fixed:2" : "fixed:1";
    RequestResult r = e.Run(Options(system_ + std::to_string(i), "q", mode));
    EXPECT_EQ(r.depth, i % 2 ? 2 : 1);  // each fits alone, so each request is served cached
    const EngineCacheStats s = e.cache_stats();
    EXPECT_LE(s.total.bytes_used, budget) << "after request " << i;
    EXPECT_EQ(s.total.budget, budget);
  }
  EXPECT_GT(e.cache_stats().total.evictions, 0u);
}

TEST_F(EngineModesTest, BatchedRequestsGiveTheSameTextAsAlone) {
  Engine e(lm_->model(), {});
  std::vector<RequestOptions> opts = {Options(system_, "a?", "fixed:1"),
                                      Options("other prefix", "b?", "none"),
                                      Options(system_, "a much longer question here?", "dual")};
  for (auto& o : opts) {
    o.sampler.temperature = 0.8f;
    o.sampler.seed = 7;
    o.sampler.block_length = 4;
    o.sampler.steps = 8;
  }
  std::vector<std::vector<int32_t>> alone;
  for (const auto& o : opts) alone.push_back(Run(e, o));
  std::vector<std::unique_ptr<Request>> reqs;
  for (const auto& o : opts) reqs.push_back(e.Start(o));
  for (bool active = true; active;) {
    std::vector<Request*> batch;
    for (auto& r : reqs)
      if (!r->done()) batch.push_back(r.get());
    active = !batch.empty();
    if (active) e.StepBatch(batch);
  }
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(reqs[i]->result().canvas, alone[i]) << "request " << i;
}

// One driver: a request stepped in a batch gets the same accounting as one run alone (token-layers
// exact; FLOPs and time as shares), and Start records its own time.
TEST_F(EngineModesTest, BatchedRequestsAreAccountedLikeAlone) {
  Engine e(lm_->model(), {});
  std::vector<RequestOptions> opts = {Options(system_, "a?", "fixed:1"),
                                      Options("other prefix", "b?", "none")};
  std::vector<RequestResult> alone;
  for (const auto& o : opts) alone.push_back(e.Run(o));
  std::vector<std::unique_ptr<Request>> reqs;
  for (const auto& o : opts) reqs.push_back(e.Start(o));
  for (bool active = true; active;) {
    std::vector<Request*> batch;
    for (auto& r : reqs)
      if (!r->done()) batch.push_back(r.get());
    active = !batch.empty();
    if (active) e.StepBatch(batch);
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestResult r = reqs[i]->result();
    EXPECT_EQ(r.token_layers, alone[i].token_layers) << i;
    EXPECT_GT(alone[i].flops, 0) << i;
    EXPECT_GT(r.flops, 0) << i;
    EXPECT_GT(r.start_seconds, 0) << i;
    EXPECT_GT(r.forward_seconds, 0) << i;
    EXPECT_GT(r.sample_seconds, 0) << i;
    EXPECT_GE(alone[i].seconds,
              alone[i].start_seconds + alone[i].forward_seconds + alone[i].sample_seconds)
        << i;
  }
}

TEST_F(EngineModesTest, StepEventsReportTheCommittedTokens) {
  Engine e(lm_->model(), {});
  RequestOptions o = Options(system_, "q", "none");
  o.sampler.temperature = 0.8f;
  o.sampler.seed = 3;
  o.sampler.block_length = 4;
  std::vector<CommittedToken> committed;
  std::vector<int32_t> streamed;
  int steps = 0;
  const RequestResult r = e.Run(o, [&](const StepEvent& ev) {
    EXPECT_EQ(ev.step, ++steps);
    EXPECT_EQ(ev.canvas.size(), static_cast<size_t>(o.sampler.gen_length));
    committed.insert(committed.end(), ev.committed.begin(), ev.committed.end());
    ASSERT_GE(ev.final_length, static_cast<int>(streamed.size()));  // never shrinks
    streamed.insert(streamed.end(), ev.canvas.begin() + streamed.size(),
                    ev.canvas.begin() + ev.final_length);
  });
  EXPECT_EQ(steps, r.steps);
  EXPECT_EQ(streamed, r.answer);
  EXPECT_FALSE(committed.empty());
  for (const CommittedToken& t : committed) EXPECT_EQ(t.token, r.canvas.at(t.position));
}

TEST_F(EngineModesTest, DualCacheComputesFewerTokenLayers) {
  Engine e(lm_->model(), {});
  auto o = Options(system_, "q", "dual");
  o.sampler.block_length = 4;
  o.sampler.steps = 8;
  RequestResult dual = e.Run(o);
  o.cache = ParseCacheMode("none");
  RequestResult none = e.Run(o);
  EXPECT_EQ(dual.canvas.size(), 8u);
  EXPECT_LT(dual.token_layers, none.token_layers);
}

// Refresh interval R (the method's within-request reuse): R = 1 refreshes on every step, which must
// change nothing; a larger R computes the prefix (in the layers past the depth) only on refresh
// steps, exactly ceil(steps / R) of them.
TEST_F(EngineModesTest, RefreshEveryStepEqualsNoRefresh) {
  Engine e(lm_->model(), {});
  for (const std::string q : {"q one", "another question"}) {
    auto o = Options(system_, q, "fixed:1");
    o.refresh_interval = 0;
    const RequestResult off = e.Run(o);
    o.refresh_interval = 1;
    const RequestResult every = e.Run(o);
    EXPECT_EQ(every.canvas, off.canvas);
    EXPECT_EQ(every.token_layers, off.token_layers);
  }
}

TEST_F(EngineModesTest, RefreshSkipsThePrefixBetweenRefreshSteps) {
  Engine e(lm_->model(), {});
  const uint64_t L = lm_->model().config().n_layer;
  auto o = Options(system_, "q one", "fixed:1");
  o.refresh_interval = 0;
  (void)e.Run(o);  // build the prefix entry
  for (const int R : {2, 3, 8, 100}) {
    o.refresh_interval = R;
    const RequestResult r = e.Run(o);
    ASSERT_TRUE(r.prefix_hit);
    ASSERT_GT(r.prefix_used, 0);
    const uint64_t n = o.prompt.size() + o.sampler.gen_length, P = r.prefix_used;
    const uint64_t refreshes = (r.steps + R - 1) / R;
    // refresh step: layer 0 without the prefix, layers 1.. with it; other steps: no prefix anywhere
    const uint64_t want = refreshes * ((n - P) + (L - 1) * n) + (r.steps - refreshes) * L * (n - P);
    EXPECT_EQ(r.token_layers, want) << "R=" << R << " steps=" << r.steps;
    EXPECT_EQ(r.canvas.size(), 8u);
  }
}

TEST(CacheModeParse, AcceptsEveryFormAndNamesBadOnes) {
  EXPECT_EQ(ParseCacheMode("bicache+dual").ToString(), "bicache+dual");
  EXPECT_EQ(ParseCacheMode("fixed:3").fixed_depth, 3);
  EXPECT_TRUE(ParseCacheMode("dual").dual);
  for (const char* bad : {"", "fast", "fixed:", "fixed:-1", "llm+bicache", "dual+dual", "none+"}) {
    try {
      ParseCacheMode(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("valid:"), std::string::npos);
    }
  }
}

TEST(DepthTableTest, MonotoneConservativeEnvelopeAndLookup) {
  // Depth = similar leading layers - 1 (the rejoin layer's prefix K/V are prefix-alone too), or
  // every layer when all are similar. 20%: 1 similar -> 0; 60%: all 3 -> 3 (noisy); 70%: 2 -> 1;
  // 90%: all -> 3. The envelope keeps 70%'s 1 from 60% up.
  std::vector<CalibrationBin> bins = {{20, 3, {0.99, 0.90, 0.5}, {}, {}},
                                      {60, 2, {0.99, 0.99, 0.99}, {}, {}},
                                      {70, 2, {0.99, 0.98, 0.5}, {}, {}},
                                      {90, 1, {0.99, 0.99, 0.99}, {}, {}}};
  DepthTable t = DepthTable::FromBins(bins, 0.97, 3);
  EXPECT_EQ(t.Lookup(0.10), 0);  // below the first point: no reuse
  EXPECT_EQ(t.Lookup(0.25), 0);
  EXPECT_EQ(t.Lookup(0.65), 1);
  EXPECT_EQ(t.Lookup(0.95), 3);
  EXPECT_EQ(t.max_depth(), 3);
  const std::string path = ::testing::TempDir() + "/table.json";
  t.Save(path);
  DepthTable u = DepthTable::Load(path);
  EXPECT_EQ(u.Lookup(0.65), 1);
  EXPECT_EQ(u.bins().size(), 4u);
}

}  // namespace
}  // namespace bicache::engine

namespace bicache::engine {
namespace {

TEST_F(EngineModesTest, AuditRecordsSimilarityOfReusedLayers) {
  EngineOptions eo;
  eo.audit_rate = 1.0;
  eo.audit_log = false;
  Engine e(lm_->model(), std::move(eo));
  e.Run(Options(system_, "q", "fixed:1"));
  e.Run(Options(system_, "q2", "none"));  // no reuse: not audited
  const AuditStats a = e.audit_stats();
  EXPECT_EQ(a.audited, 1u);
  ASSERT_EQ(a.mean_similarity.size(), 2u);
  EXPECT_GT(a.mean_similarity[0], 0.0);
  EXPECT_LE(a.mean_similarity[0], 1.0 + 1e-9);
}

}  // namespace
}  // namespace bicache::engine
