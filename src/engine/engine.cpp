#include "engine/engine.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cache/memory_budget.h"
#include "engine/prefix_similarity.h"
#include "model/forward.h"
#include "util/error.h"

namespace bicache::engine {

Engine::Engine(const model::Model& model, EngineOptions options)
    : model_(model), options_(std::move(options)) {
  if (options_.cache_budget_bytes == 0) options_.cache_budget_bytes = cache::DefaultBudgetBytes();
}

cache::PrefixStore& Engine::StoreFor(int layers_held) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = stores_[layers_held];
  if (!slot) slot = std::make_unique<cache::PrefixStore>(options_.cache_budget_bytes);
  return *slot;
}

void Engine::FitBudget(cache::PrefixStore* grown) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t budget = options_.cache_budget_bytes;
  size_t total = 0;
  for (const auto& [held, store] : stores_) total += store->stats().bytes_used;
  if (total <= budget) return;
  std::vector<cache::PrefixStore*> order;
  for (const auto& [held, store] : stores_) {
    if (store.get() != grown) order.push_back(store.get());
  }
  order.push_back(grown);
  for (cache::PrefixStore* s : order) {
    if (total <= budget) break;
    const size_t used = s->stats().bytes_used;
    const size_t over = total - budget;
    total = total - used + s->EvictDownTo(used > over ? used - over : 0);
  }
}

int Engine::LayersHeldFor(const CacheMode& mode) const {
  const int L = model_.config().n_layer;
  switch (mode.prefix) {
    case PrefixReuse::kNone:
      return 0;
    case PrefixReuse::kLlm:
      return L;
    case PrefixReuse::kFixed:
      return std::min(mode.fixed_depth, L);
    case PrefixReuse::kBicache:
      return std::min(options_.depth_table.max_depth(), L);
  }
  return 0;
}

int Engine::DepthFor(const CacheMode& mode, double ratio) const {
  if (mode.prefix == PrefixReuse::kBicache) {
    return std::min(options_.depth_table.Lookup(ratio), model_.config().n_layer);
  }
  return LayersHeldFor(mode);
}

std::unique_ptr<Request> Engine::Start(RequestOptions opt) {
  const model::ModelConfig& c = model_.config();
  opt.sampler.mask_id = c.mask_token_id;
  diffusion::Validate(opt.sampler);
  const int P = static_cast<int>(opt.prompt.size());
  const int n = P + opt.sampler.gen_length;
  if (P == 0) throw Error(ErrorKind::kInvalidArgument, "the prompt is empty");
  if (n > c.context_length) {
    throw Error(ErrorKind::kInvalidArgument,
                "This model's maximum context length is " + std::to_string(c.context_length) +
                    " tokens, but the request needs " + std::to_string(n) + " (" +
                    std::to_string(P) + " prompt + " + std::to_string(opt.sampler.gen_length) +
                    " generated)");
  }
  for (int32_t t : opt.prompt) {
    if (t < 0 || t >= c.n_vocab) {
      throw Error(ErrorKind::kInvalidArgument, "prompt token id " + std::to_string(t) +
                                                   " is outside the vocabulary of " +
                                                   std::to_string(c.n_vocab));
    }
  }
  if (opt.sampler.cfg_scale > 0 && opt.cache.reuses_prefix()) {
    throw Error(ErrorKind::kInvalidArgument,
                "classifier-free guidance (--cfg) masks the prompt, so it cannot reuse a cached "
                "prefix: use --cache none or dual");
  }
  // The prefix must leave at least one prompt token to compute (the shifted head reads row P-1).
  const int max_prefix = P - (c.shift_logits ? 1 : 0);
  int declared = opt.prefix_len;
  if (declared < 0) declared = static_cast<int>(recent_.SharedPrefixLength(opt.prompt));
  recent_.Observe(opt.prompt);
  declared = std::clamp(declared, 0, max_prefix);

  std::optional<cache::PrefixPin> pin;
  int depth = 0;
  bool hit = false;
  const int held = LayersHeldFor(opt.cache);
  if (opt.cache.reuses_prefix() && declared > 0 && held > 0) {
    cache::PrefixStore& store = StoreFor(held);
    std::span<const int32_t> prompt(opt.prompt);
    pin = store.Lookup(prompt, declared);
    hit = pin.has_value();
    const bool exact = pin && static_cast<int>(pin->length()) == declared;
    if (!exact && DepthFor(opt.cache, static_cast<double>(declared) / n) > 0) {
      // Miss, or only a shorter nested prefix is cached: compute the declared prefix alone and
      // cache it (outside any lock; a concurrent builder of the same prefix just loses the race).
      model::ForwardStats st;
      auto payload = BuildPrefixPayload(model_, prompt.first(declared), held, &st);
      try {
        pin = store.Insert(prompt.first(declared), std::move(payload));
        hit = false;
        FitBudget(&store);
        std::lock_guard<std::mutex> lock(mutex_);
        ++prefix_builds_;
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::kResource) throw;
        std::lock_guard<std::mutex> lock(mutex_);
        ++insert_failures_;  // keep the shorter entry if there is one, else run uncached
      }
    }
    if (pin) {
      depth = DepthFor(opt.cache, static_cast<double>(pin->length()) / n);
      depth = std::min(depth, static_cast<const PrefixKvPayload&>(*pin->payload()).layers_held);
    }
  }
  if (depth > 0 && options_.audit_rate > 0) MaybeAudit(opt, static_cast<int>(pin->length()), depth);
  return std::make_unique<Request>(model_, std::move(opt), std::move(pin), depth, hit);
}

void Engine::StepBatch(std::span<Request* const> requests) {
  std::vector<model::SeqPlan> plans;
  for (Request* r : requests) r->PlanStep(&plans);
  model::ForwardStats st;
  const auto t0 = std::chrono::steady_clock::now();
  model::Forward(model_, plans, &st);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The batch's time is shared evenly among its requests.
  for (Request* r : requests) {
    r->FinishStep();
    r->add_seconds(secs / requests.size());
  }
}

RequestResult Engine::Run(RequestOptions options, const StepCallback& on_step) {
  using Clock = std::chrono::steady_clock;
  auto secs = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  const auto t0 = Clock::now();
  std::unique_ptr<Request> req = Start(std::move(options));
  const auto t_started = Clock::now();
  double forward_s = 0, sample_s = 0;
  while (!req->done()) {
    std::vector<model::SeqPlan> plans;
    req->PlanStep(&plans);
    model::ForwardStats st;
    const auto a = Clock::now();
    model::Forward(model_, plans, &st);
    const auto b = Clock::now();
    req->add_token_layers(st.token_layers);
    req->add_flops(st.matmul_flops + st.attention_flops);
    req->FinishStep();
    const auto c = Clock::now();
    forward_s += secs(a, b);
    sample_s += secs(b, c);
    if (on_step) on_step(*req);
  }
  req->add_seconds(secs(t0, Clock::now()));
  req->add_phase_seconds(secs(t0, t_started), forward_s, sample_s);
  return req->result();
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
  std::lock_guard<std::mutex> lock(mutex_);
  EngineCacheStats s;
  for (const auto& [held, store] : stores_) {
    const cache::PrefixStoreStats t = store->stats();
    s.total.queries += t.queries;
    s.total.hits += t.hits;
    s.total.misses += t.misses;
    s.total.inserts += t.inserts;
    s.total.evictions += t.evictions;
    s.total.entries += t.entries;
    s.total.bytes_used += t.bytes_used;
    s.total.bytes_pinned += t.bytes_pinned;
  }
  s.total.budget = options_.cache_budget_bytes;
  s.prefix_builds = prefix_builds_;
  s.insert_failures = insert_failures_;
  return s;
}

}  // namespace bicache::engine
