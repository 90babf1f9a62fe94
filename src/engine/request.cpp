#include "engine/request.h"

#include <algorithm>

#include "engine/prefix_entry.h"

#include "util/error.h"

namespace bicache::engine {

Request::Request(const model::Model& model, RequestOptions options,
                 std::optional<cache::PrefixPin> pin, int depth, bool prefix_hit)
    : model_(model),
      opt_(std::move(options)),
      pin_(std::move(pin)),
      denoiser_(opt_.sampler, model.config().n_vocab) {
  const model::ModelConfig& c = model.config();
  prompt_len_ = static_cast<int>(opt_.prompt.size());
  gen_ = opt_.sampler.gen_length;
  shift_ = c.shift_logits ? 1 : 0;
  if (pin_ && depth > 0) {
    prefix_ = static_cast<int>(pin_->length());
    depth_ = std::min(depth, c.n_layer);
    prefix_hit_ = prefix_hit;
  } else {
    pin_.reset();  // no reuse: release the entry at once
  }
  tokens_ = opt_.prompt;
  tokens_.resize(prompt_len_ + gen_, opt_.sampler.mask_id);
  if (opt_.sampler.cfg_scale > 0) {
    uncond_tokens_ = tokens_;
    std::fill_n(uncond_tokens_.begin(), prompt_len_, opt_.sampler.mask_id);
    uncond_logits_.resize(static_cast<size_t>(gen_) * c.n_vocab);
  }
  logits_.resize(static_cast<size_t>(gen_) * c.n_vocab);
  kv_.Reset(c.n_layer, n_tokens());
  if (depth_ > 0) {
    const auto& payload = static_cast<const PrefixKvPayload&>(*pin_->payload());
    CopyPrefixInto(payload, depth_, &kv_, c.d_model, c.kv_dim());
  }
  block_causal_ = c.block_causal();
  if (block_causal_) {
    // Engine::Start hands a block-causal request only whole blocks of prefix, at every layer.
    if (depth_ > 0 && (depth_ != c.n_layer || prefix_ % c.block_length != 0)) {
      throw Error(ErrorKind::kInternal, "a block-diffusion request got a partial prefix entry");
    }
    kv_final_ = depth_ > 0 ? prefix_ : 0;
  }
}

void Request::PlanBlockStep(std::vector<model::SeqPlan>* plans) {
  const model::ModelConfig& c = model_.config();
  const int L = c.n_layer, B = c.block_length;
  const auto block = denoiser_.current_block();  // canvas coordinates
  const int begin = prompt_len_ + block.first, end = prompt_len_ + block.second;
  // The sequence ends with the model block holding the current (sub-)block: what follows cannot
  // be seen by it, and is not there yet in the published generation code either.
  const int n = std::min(n_tokens(), (end + B - 1) / B * B);
  // Rows of every layer before the model block of `begin` no longer change once all their tokens
  // are committed; keep the (possibly grown) K/V rows of those in kv_.
  const int compute_begin = std::min(kv_final_, begin - shift_);
  kv_.n_tok = n;
  for (auto& layer : kv_.layers) {
    layer.k.resize(static_cast<size_t>(n) * c.kv_dim());
    layer.v.resize(static_cast<size_t>(n) * c.kv_dim());
  }
  model::SeqPlan p;
  p.tokens = std::span<const int32_t>(tokens_).first(n);
  if (compute_begin > 0) {
    p.partial_depth = L;
    p.compute_begin = compute_begin;
    p.compute_end = n;
    p.kv_in = &kv_;
  }
  p.kv_out = &kv_;
  p.capture_kv_layers = L;
  p.logits_begin = begin - shift_;
  p.logits_end = end - shift_;
  p.logits = &logits_[static_cast<size_t>(block.first) * c.n_vocab];
  plans->push_back(p);
  kv_final_ = begin / B * B;  // after this forward: every block before `begin`'s is final
  forwards_ += 1;
}

void Request::PlanStep(std::vector<model::SeqPlan>* plans) {
  const int L = model_.config().n_layer;
  const int n = n_tokens();
  // Copy the canvas the denoiser has committed so far into the sequence.
  const auto& canvas = denoiser_.canvas();
  std::copy(canvas.begin(), canvas.end(), tokens_.begin() + prompt_len_);
  if (!uncond_tokens_.empty())
    std::copy(canvas.begin(), canvas.end(), uncond_tokens_.begin() + prompt_len_);
  if (block_causal_) return PlanBlockStep(plans);

  model::SeqPlan p;
  p.tokens = tokens_;
  const auto block = denoiser_.current_block();
  const bool dual_step = opt_.cache.dual && block == dual_block_;
  if (dual_step) {
    // Only the current block is computed; every other token's K/V come from the cache that was
    // captured at the block start.
    p.partial_depth = L;
    p.compute_begin = prompt_len_ + block.first - shift_;
    p.compute_end = prompt_len_ + block.second;
    p.kv_in = &kv_;
    p.logits_begin = prompt_len_ + block.first - shift_;
    p.logits_end = prompt_len_ + block.second - shift_;
    p.logits = &logits_[static_cast<size_t>(block.first) * model_.config().n_vocab];
  } else {
    const bool deep_reuse = depth_ > 0 && depth_ < L && !opt_.cache.dual &&
                            opt_.refresh_interval > 0 && have_refresh_ &&
                            steps_since_refresh_ < opt_.refresh_interval;
    if (depth_ > 0) {
      p.partial_depth = deep_reuse ? L : depth_;
      p.compute_begin = prefix_;
      p.compute_end = n;
      p.kv_in = &kv_;
    }
    const bool capture =
        opt_.cache.dual || (depth_ > 0 && depth_ < L && opt_.refresh_interval > 0 && !deep_reuse);
    if (capture) {
      p.kv_out = &kv_;
      p.capture_kv_layers = L;
    }
    if (deep_reuse) {
      ++steps_since_refresh_;
    } else if (capture && !opt_.cache.dual) {
      have_refresh_ = true;
      steps_since_refresh_ = 1;
    }
    if (opt_.cache.dual) dual_block_ = block;
    p.logits_begin = prompt_len_ - shift_;
    p.logits_end = n - shift_;
    p.logits = logits_.data();
  }
  plans->push_back(p);
  if (!uncond_tokens_.empty()) {
    model::SeqPlan u;
    u.tokens = uncond_tokens_;
    u.logits_begin = prompt_len_ - shift_;
    u.logits_end = n - shift_;
    u.logits = uncond_logits_.data();
    plans->push_back(u);
  }
  forwards_ += static_cast<int>(uncond_tokens_.empty() ? 1 : 2);
}

void Request::FinishStep() {
  const std::vector<int> positions =
      denoiser_.Step(logits_.data(), uncond_tokens_.empty() ? nullptr : uncond_logits_.data());
  last_committed_.clear();
  for (int p : positions) last_committed_.push_back({p, denoiser_.canvas()[p]});
}

StepEvent Request::LastStep() const {
  StepEvent e;
  e.step = denoiser_.step();
  e.committed = last_committed_;
  e.canvas = denoiser_.canvas();
  e.final_length = std::min(denoiser_.committed_prefix(), denoiser_.answer_length());
  return e;
}

RequestResult Request::result() const {
  RequestResult r;
  r.canvas = denoiser_.canvas();
  // While running (a request ended early, Scheduler::Handle::EndEarly), the final part so far.
  const int answer = done() ? denoiser_.answer_length() : LastStep().final_length;
  r.answer.assign(r.canvas.begin(), r.canvas.begin() + answer);
  r.finish_reason = std::string(denoiser_.finish_reason());
  r.steps = denoiser_.step();
  r.forwards = forwards_;
  r.prefix_used = depth_ > 0 ? prefix_ : 0;
  r.depth = depth_;
  r.prefix_hit = prefix_hit_;
  r.prefix_ratio = static_cast<double>(r.prefix_used) / n_tokens();
  r.token_layers = token_layers_;
  r.flops = flops_;
  r.seconds = seconds_;
  r.start_seconds = start_seconds_;
  r.forward_seconds = forward_seconds_;
  r.sample_seconds = sample_seconds_;
  return r;
}

}  // namespace bicache::engine
