#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "cache/memory_budget.h"
#include "engine/prefix_similarity.h"
#include "engine/request_check.h"
#include "model/forward.h"
#include "util/error.h"

namespace bicache::engine {

Engine::Engine(const model::Model& model, EngineOptions options)
    : model_(model),
      options_(std::move(options)),
      stores_(options_.cache_budget_bytes ? options_.cache_budget_bytes
                                          : cache::DefaultBudgetBytes()) {
  options_.cache_budget_bytes = stores_.budget();
}

int Engine::LayersHeldFor(const CacheMode& mode) const {
  return engine::LayersHeldFor(mode, options_.depth_table, model_.config().n_layer);
}

int Engine::DepthFor(const CacheMode& mode, double ratio) const {
  return engine::DepthFor(mode, options_.depth_table, model_.config().n_layer, ratio);
}

std::unique_ptr<Request> Engine::Start(RequestOptions opt) {
  StartPlan plan = PlanStart(std::move(opt));
  std::shared_ptr<PrefixKvPayload> built;
  if (!plan.build.empty()) {
    const auto t0 = std::chrono::steady_clock::now();
    model::ForwardStats st;
    built = BuildPrefixPayload(model_, plan.build, plan.held, &st);
    plan.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return FinishStart(std::move(plan), std::move(built));
}

Engine::StartPlan Engine::PlanStart(RequestOptions opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const model::ModelConfig& c = model_.config();
  opt.sampler.mask_id = c.mask_token_id;
  const int P = static_cast<int>(opt.prompt.size());
  // A block-diffusion model denoises its own blocks (sub-blocks for fast-dllm-v2) on the absolute
  // block grid: the request's block length is the model's, offset by the prompt's last block.
  const bool exact_reuse = c.block_causal();
  if (exact_reuse) {
    const int unit = c.denoise_block();
    opt.sampler.block_length = unit;
    opt.sampler.block_offset = P % unit;
  }
  CheckRequest(opt, c);
  const int n = P + opt.sampler.gen_length;
  // The prefix must leave at least one prompt token to compute (the shifted head reads row P-1).
  const int max_prefix = P - (c.shift_logits ? 1 : 0);
  int declared = opt.prefix_len;
  if (declared < 0) declared = static_cast<int>(recent_.SharedPrefixLength(opt.prompt));
  recent_.Observe(opt.prompt);
  declared = std::clamp(declared, 0, max_prefix);
  // Block-causal: K/V of whole blocks do not depend on what follows them, so a cached prefix is
  // reused at every layer, exactly, up to the last whole block inside the shared part.
  if (exact_reuse) declared = declared / c.block_length * c.block_length;

  StartPlan plan;
  plan.held = exact_reuse ? (opt.cache.reuses_prefix() ? c.n_layer : 0) : LayersHeldFor(opt.cache);
  if (opt.cache.reuses_prefix() && declared > 0 && plan.held > 0) {
    cache::PrefixStore& store = stores_.For(plan.held);
    std::span<const int32_t> prompt(opt.prompt);
    plan.pin = store.Lookup(prompt, declared);
    plan.hit = plan.pin.has_value();
    const bool exact = plan.pin && static_cast<int>(plan.pin->length()) == declared;
    if (!exact && (exact_reuse || DepthFor(opt.cache, static_cast<double>(declared) / n) > 0)) {
      // Miss, or only a shorter nested prefix is cached: the declared prefix is computed alone
      // (by Start, or by the scheduler in chunks) and cached.
      plan.build.assign(prompt.begin(), prompt.begin() + declared);
    }
  }
  plan.options = std::move(opt);
  plan.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return plan;
}

std::unique_ptr<Request> Engine::FinishStart(StartPlan plan,
                                             std::shared_ptr<PrefixKvPayload> built) {
  const auto t0 = std::chrono::steady_clock::now();
  const model::ModelConfig& c = model_.config();
  RequestOptions& opt = plan.options;
  const bool exact_reuse = c.block_causal();
  const int n = static_cast<int>(opt.prompt.size()) + opt.sampler.gen_length;
  std::optional<cache::PrefixPin>& pin = plan.pin;
  bool hit = plan.hit;
  if (built) {
    cache::PrefixStore& store = stores_.For(plan.held);
    const int len = static_cast<int>(plan.build.size());
    // A build shared by several requests (the scheduler's waiters on one prefix): after the
    // first, the entry is there already, and is a hit (a store budget too small for it: built
    // again below, and refused again).
    if (auto cached = plan.shared_build ? store.Lookup(plan.build, len) : std::nullopt;
        cached && cached->length() == plan.build.size()) {
      pin = std::move(cached);
      hit = true;
      built.reset();
    }
  }
  if (built) {
    cache::PrefixStore& store = stores_.For(plan.held);
    try {
      pin = store.Insert(plan.build, std::move(built));
      hit = false;
      stores_.FitBudget(&store);
      std::lock_guard<std::mutex> lock(mutex_);
      ++prefix_builds_;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kResource) throw;
      std::lock_guard<std::mutex> lock(mutex_);
      ++insert_failures_;  // keep the shorter entry if there is one, else run uncached
    }
  }
  int depth = 0;
  if (pin) {
    depth = exact_reuse ? c.n_layer : DepthFor(opt.cache, static_cast<double>(pin->length()) / n);
    depth = std::min(depth, static_cast<const PrefixKvPayload&>(*pin->payload()).layers_held);
  }
  if (depth > 0 && !exact_reuse && options_.audit_rate > 0)
    MaybeAudit(opt, static_cast<int>(pin->length()), depth);
  auto req = std::make_unique<Request>(model_, std::move(opt), std::move(pin), depth, hit);
  req->add_start_seconds(
      plan.seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return req;
}

void Engine::MaybeAudit(const RequestOptions& opt, int prefix_len, int depth) {
  uint64_t k;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    k = audit_counter_++;
  }
  // Deterministic sampling: the k-th prefix-reusing request is audited when its hash falls below
  // the rate, so a run's audited set does not depend on timing.
  uint64_t h = (k + 1) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  if (static_cast<double>(h >> 11) / static_cast<double>(1ull << 53) >= options_.audit_rate) return;
  std::vector<int32_t> tokens = opt.prompt;
  tokens.resize(tokens.size() + opt.sampler.gen_length, model_.config().mask_token_id);
  const std::vector<double> sim = PrefixKvSimilarity(model_, tokens, prefix_len);
  const double threshold = options_.depth_table.empty() ? 0.97 : options_.depth_table.threshold();
  double min_reused = 1.0;
  for (int l = 0; l < depth; ++l) min_reused = std::min(min_reused, sim[l]);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    AuditStats& a = audit_;
    if (a.mean_similarity.empty()) a.mean_similarity.assign(sim.size(), 0.0);
    a.audited++;
    for (size_t l = 0; l < sim.size(); ++l)
      a.mean_similarity[l] += (sim[l] - a.mean_similarity[l]) / a.audited;
    if (min_reused < threshold) a.below_threshold++;
    a.min_reused_similarity = std::min(a.min_reused_similarity, min_reused);
  }
  if (options_.audit_log) {
    std::string line;
    for (size_t l = 0; l < sim.size(); ++l) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.3f%s", l ? " " : "", sim[l],
                    static_cast<int>(l) + 1 == depth ? " |" : "");
      line += buf;
    }
    std::fprintf(stderr,
                 "bicache audit: prefix %d/%zu tokens, depth %d, similarity by layer: %s (promise: "
                 "> %.2f before '|')%s\n",
                 prefix_len, tokens.size(), depth, line.c_str(), threshold,
                 min_reused < threshold ? "  BELOW THRESHOLD" : "");
  }
}

AuditStats Engine::audit_stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return audit_;
}

EngineCacheStats Engine::cache_stats() const {
  EngineCacheStats s;
  s.total = stores_.stats();
  std::lock_guard<std::mutex> lock(mutex_);
  s.prefix_builds = prefix_builds_;
  s.insert_failures = insert_failures_;
  return s;
}

}  // namespace bicache::engine
