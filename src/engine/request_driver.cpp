// The request driver: Engine::StepBatch steps any number of requests through one forward, and
// Engine::Run is a batch of one, so a request's output and its accounting are the same whoever
// drives it (Run, the scheduler, eval).
#include <chrono>
#include <vector>

#include "engine/engine.h"
#include "model/forward.h"

namespace bicache::engine {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Tokens x layers the forward computes for one plan: the compute range in layers below
// partial_depth, every token from there on (the forward counts the same rows, model/forward.cpp).
uint64_t PlanTokenLayers(const model::SeqPlan& p, int n_layer) {
  const int n = static_cast<int>(p.tokens.size());
  const int end = p.compute_end < 0 ? n : p.compute_end;
  const uint64_t partial = static_cast<uint64_t>(p.partial_depth) * (end - p.compute_begin);
  return partial + static_cast<uint64_t>(n_layer - p.partial_depth) * n;
}

}  // namespace

void Engine::StepBatch(std::span<Request* const> requests) {
  // Request i's plans are plans[first[i], first[i + 1]) (2 with classifier-free guidance).
  std::vector<model::SeqPlan> plans;
  std::vector<size_t> first;  // [requests + 1]
  for (Request* r : requests) {
    first.push_back(plans.size());
    r->PlanStep(&plans);
  }
  first.push_back(plans.size());
  model::ForwardStats st;
  const auto t0 = Clock::now();
  model::Forward(model_, plans, &st);
  const double forward_s = Seconds(t0, Clock::now());

  // The forward reports one total: a request's token-layers are counted from its own plans, and
  // the FLOPs shared in proportion to them (exact for a batch of one). The time is split evenly.
  const int n_layer = model_.config().n_layer;
  std::vector<uint64_t> token_layers(requests.size(), 0);  // [requests]
  uint64_t total = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    for (size_t p = first[i]; p < first[i + 1]; ++p)
      token_layers[i] += PlanTokenLayers(plans[p], n_layer);
    total += token_layers[i];
  }
  const double flops = st.matmul_flops + st.attention_flops;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto a = Clock::now();
    requests[i]->FinishStep();
    const double share = total > 0 ? static_cast<double>(token_layers[i]) / total : 0.0;
    requests[i]->add_step(forward_s / requests.size(), Seconds(a, Clock::now()), token_layers[i],
                          flops * share);
  }
}

RequestResult Engine::Run(RequestOptions options, const StepCallback& on_step) {
  const auto t0 = Clock::now();
  std::unique_ptr<Request> req = Start(std::move(options));
  Request* const batch[] = {req.get()};
  while (!req->done()) {
    StepBatch(batch);
    if (on_step) on_step(req->LastStep());
  }
  req->set_seconds(Seconds(t0, Clock::now()));  // the whole wall time, start and callbacks too
  return req->result();
}

}  // namespace bicache::engine
