// One generation request as a step machine: it says what the next forward must compute (its
// SeqPlans) and consumes the logits afterwards. One driver steps it, Engine::StepBatch (a batch of
// one for Engine::Run, several for the scheduler and eval), so a request's output and its
// accounting do not depend on who drives it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/prefix_pin.h"
#include "diffusion/sampler.h"
#include "engine/cache_mode.h"
#include "engine/step_event.h"
#include "model/plan.h"
#include "model/weights.h"

namespace bicache::engine {

// Default refresh interval R of partial-depth modes (bicache, fixed:B): the prefix is computed in
// the layers past the depth on every R-th step only and its K/V reused in between (docs/bicache.md
// has the measurement behind 8: answers unchanged in 59 of 60 held-out docqa samples, 2.5x faster).
inline constexpr int kDefaultRefreshInterval = 8;

struct RequestOptions {
  std::vector<int32_t> prompt;  // every prompt token (chat-formatted already)
  int prefix_len = -1;          // declared shareable prefix; -1 = automatic, 0 = none
  diffusion::SamplerConfig sampler;
  CacheMode cache;
  int refresh_interval =
      kDefaultRefreshInterval;  // R: between refreshes reuse the deep-layer prefix K/V (0 = never)
};

struct RequestResult {
  std::vector<int32_t> answer;  // canvas tokens before the first stop token (see result())
  std::vector<int32_t> canvas;  // the whole final canvas
  std::string finish_reason;    // "stop" or "length"; "" when taken before the canvas was done
  int steps = 0;                // denoising steps
  int forwards = 0;             // forward passes over this request (a CFG step counts 2)
  int prefix_used = 0;          // cached prefix tokens reused (0 = none)
  int depth = 0;                // layers whose prefix K/V came from the cache
  bool prefix_hit = false;      // the prefix came from the store (not built for this request)
  double prefix_ratio = 0;      // prefix_used / (prompt + canvas)
  uint64_t token_layers = 0;    // tokens x layers computed, summed over its forwards
  // Matmul + attention FLOPs of its forwards; a batched forward's FLOPs are shared among its
  // requests in proportion to their token-layers.
  double flops = 0;
  // Engine::Run: the whole wall time (start, steps, callbacks). Batched (StepBatch): its share
  // of the batch forwards (the batch's time split evenly), plus whatever its driver adds.
  double seconds = 0;
  // Where the time went: `start` = prefix lookup, prefix-alone build on a miss and copying the
  // entry into the request (Engine::Start); `forward` = its share of the model's forwards (a
  // batch's time split evenly); `sample` = the denoiser's scoring and commits. Under Engine::Run
  // the remainder (planning, the step callback) is seconds - the three.
  double start_seconds = 0, forward_seconds = 0, sample_seconds = 0;
};

class Request {
 public:
  // `pin` holds the cached prefix entry (if any) for the request's lifetime; `depth` is the number
  // of layers to serve from it (0 = no reuse).
  Request(const model::Model& model, RequestOptions options, std::optional<cache::PrefixPin> pin,
          int depth, bool prefix_hit);
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  bool done() const { return denoiser_.done(); }
  // Appends this step's plans (1, or 2 with classifier-free guidance) to `plans`.
  void PlanStep(std::vector<model::SeqPlan>* plans);
  // PlanStep for a block-diffusion model: the sequence ends with the current model block; only
  // the rows from the first non-final model block on are computed, against the K/V of the final
  // ones, and their K/V captured (the rows of finished blocks become final in the next step).
  void PlanBlockStep(std::vector<model::SeqPlan>* plans);
  // Consumes the logits the planned forward produced and commits tokens.
  void FinishStep();
  // The last FinishStep as a callback sees it (spans into this request, valid until the next step).
  StepEvent LastStep() const;
  const diffusion::Denoiser& denoiser() const { return denoiser_; }
  // Also callable before done(): then `answer` is the final part so far (the leftmost committed
  // run) and finish_reason is "".
  RequestResult result() const;
  int n_tokens() const { return static_cast<int>(tokens_.size()); }

  // Accounting, filled by the engine (see RequestResult for what each figure means).
  void add_seconds(double s) { seconds_ += s; }
  void set_seconds(double s) { seconds_ = s; }
  void add_start_seconds(double s) { start_seconds_ += s; }
  // One step: its share of the forward (also counted in seconds), its own sampling time, and its
  // share of the forward's work.
  void add_step(double forward_s, double sample_s, uint64_t token_layers, double flops) {
    seconds_ += forward_s;
    forward_seconds_ += forward_s;
    sample_seconds_ += sample_s;
    token_layers_ += token_layers;
    flops_ += flops;
  }

 private:
  const model::Model& model_;
  RequestOptions opt_;
  std::optional<cache::PrefixPin> pin_;
  int depth_ = 0;   // prefix layers served from the cache
  int prefix_ = 0;  // prefix tokens served from the cache
  bool prefix_hit_ = false;
  int prompt_len_ = 0, gen_ = 0, shift_ = 0;
  diffusion::Denoiser denoiser_;
  std::vector<int32_t> tokens_;         // [n] prompt + canvas
  std::vector<int32_t> uncond_tokens_;  // [n] CFG: prompt masked
  model::SeqKv kv_;                     // [n] per-request K/V: cached prefix rows + captures
  std::vector<float> logits_;           // [gen, V] canvas rows
  std::vector<float> uncond_logits_;    // [gen, V] CFG
  std::vector<CommittedToken> last_committed_;  // [tokens committed by the last step]
  int steps_since_refresh_ = 0;
  bool have_refresh_ = false;
  std::pair<int, int> dual_block_{-1, -1};  // block the dual cache was built for
  // Block-diffusion models (block_causal_): K/V rows [0, kv_final_) are final -- whole model
  // blocks whose tokens are all committed (or a cached prefix) -- and are never computed again.
  bool block_causal_ = false;
  int kv_final_ = 0;
  int forwards_ = 0;
  uint64_t token_layers_ = 0;
  double flops_ = 0;
  double seconds_ = 0;
  double start_seconds_ = 0, forward_seconds_ = 0, sample_seconds_ = 0;
};

}  // namespace bicache::engine
