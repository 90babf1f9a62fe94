// The engine: a model, its prefix caches and its depth table; starts and runs requests.
//
// Prefix entries are kept in one PrefixStore per "layers held" (the deepest layer an entry may
// serve: the table's maximum depth for bicache, B for fixed:B, every layer for llm), under one
// byte budget shared by all stores (cache/store_set.h says how the budget is kept).
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "cache/recent_prefix.h"
#include "cache/store_set.h"
#include "engine/depth_table.h"
#include "engine/prefix_entry.h"
#include "engine/request.h"
#include "engine/step_event.h"

namespace bicache::engine {

struct EngineOptions {
  size_t cache_budget_bytes = 0;  // shared by all stores; 0 = cache::DefaultBudgetBytes()
  DepthTable depth_table;         // for bicache mode; empty table = depth 0 everywhere
  // Audit: this fraction of requests that reuse a prefix also has its prefix K/V recomputed
  // without the cache at its first step, and the similarity actually seen is recorded next to
  // what the table promised (threshold). Costs two extra forwards per audited request.
  double audit_rate = 0;
  bool audit_log = true;  // one stderr line per audited request
};

// What the audit has seen: per layer, the mean prefix K/V similarity over audited requests, and
// how many audited requests had a reused layer below the table's threshold.
struct AuditStats {
  uint64_t audited = 0;
  uint64_t below_threshold = 0;
  std::vector<double> mean_similarity;  // [n_layer]
  double min_reused_similarity = 1.0;   // lowest similarity seen in a layer that was reused
};

struct EngineCacheStats {
  cache::PrefixStoreStats total;  // summed over stores
  uint64_t prefix_builds = 0;     // entries computed (misses that built)
  uint64_t insert_failures = 0;   // entries that did not fit the budget (request ran uncached)
};

class Engine {
 public:
  Engine(const model::Model& model, EngineOptions options);

  // Looks up / builds the request's prefix entry and chooses its depth. Throws
  // Error(kInvalidArgument) for a request the model cannot run (context, sampler settings).
  std::unique_ptr<Request> Start(RequestOptions options);

  // Start in two halves, for a driver that runs prefix builds itself (the scheduler, in chunks
  // interleaved with its batch): PlanStart checks the request and looks its prefix up; when
  // `build` is not empty, that prefix must be built (PrefixBuild over `held` layers) and handed
  // to FinishStart, which caches it, chooses the depth and makes the Request. Start == PlanStart,
  // the whole build, FinishStart.
  struct StartPlan {
    RequestOptions options;               // checked, sampler completed
    int held = 0;                         // layers an entry of its store holds
    std::optional<cache::PrefixPin> pin;  // an entry found (exact, or a shorter nested one)
    bool hit = false;                     // pin came from the store
    std::vector<int32_t> build;           // the prefix to build first; empty = none
    bool shared_build = false;            // FinishStart: another request's start may have
                                          // cached this build already (look it up first)
    double seconds = 0;                   // start time so far (RequestResult::start_seconds)
  };
  StartPlan PlanStart(RequestOptions options);
  // `built`: the finished build of plan.build (null when there was none, or it was abandoned).
  std::unique_ptr<Request> FinishStart(StartPlan plan, std::shared_ptr<PrefixKvPayload> built);

  // The request driver (engine/request_driver.cpp). Run drives one request alone to completion,
  // as a batch of one through StepBatch; `on_step` (optional) is called after every step.
  using StepCallback = std::function<void(const StepEvent&)>;
  RequestResult Run(RequestOptions options, const StepCallback& on_step = {});

  // Runs one forward for several requests at once (the scheduler's and eval's iteration), advances
  // each, and records each one's share of the forward (time, token-layers, FLOPs) and its sampling
  // time.
  void StepBatch(std::span<Request* const> requests);

  const model::Model& model() const { return model_; }
  const DepthTable& depth_table() const { return options_.depth_table; }
  void set_depth_table(DepthTable t) { options_.depth_table = std::move(t); }
  EngineCacheStats cache_stats() const;
  AuditStats audit_stats() const;
  // The depth a bicache request with this prefix ratio gets (engine::DepthFor for this model).
  int DepthFor(const CacheMode& mode, double ratio) const;

 private:
  int LayersHeldFor(const CacheMode& mode) const;

  const model::Model& model_;
  EngineOptions options_;
  mutable std::mutex mutex_;  // guards the counters below
  cache::PrefixStoreSet stores_;
  cache::RecentPrefixTracker recent_;
  void MaybeAudit(const RequestOptions& opt, int prefix_len, int depth);
  uint64_t audit_counter_ = 0;
  AuditStats audit_;
  uint64_t prefix_builds_ = 0;
  uint64_t insert_failures_ = 0;
};

}  // namespace bicache::engine
