// Per-position work of one denoising step: turn one row of logits into a candidate token x0
// and a confidence score, as the reference samplers do.
//
//   LLaDA family (low_confidence, random): x0 = argmax(logits) at temperature 0, else a draw from
//     softmax(logits / T). The reference draws it as argmax(exp(l) / (-log u)^T) with one float64
//     uniform per vocabulary entry; that Gumbel-max trick samples exactly softmax(l / T), so we
//     draw the same distribution by inverse CDF with a single uniform (one exp per entry instead
//     of exp + two logs). low_confidence's confidence is softmax(logits)[x0] of the *untempered*
//     logits, as in the reference. top_p / top_k (not in the LLaDA reference) only narrow the
//     distribution x0 is drawn from.
//   Dream family (origin, maskgit_plus, topk_margin, entropy), `sample_tokens`: logits / T (when
//     T > 0), then top_p, then top_k, then softmax = D; x0 = draw from D (T > 0) or argmax D; the
//     confidence is D[x0] (maskgit_plus), top1 - top2 of D (topk_margin) or sum D log(D + 1e-10)
//     (entropy). Filters apply at T = 0 too, so they renormalise the confidence as in Dream.
//
// Deviation from both references: the mask token itself is never proposed (its logit is treated
// as -inf), so a committed position can never read as still masked.
//
// Cost: one exp per vocabulary entry and row (two for low_confidence at T > 0, where the tempered
// and untempered softmaxes differ); top_p adds a partial sort of the head of the distribution.
// One scorer owns vocab-sized scratch buffers, so use one per thread.
#pragma once

#include <cstdint>
#include <vector>

#include "diffusion/sampler_config.h"

namespace bicache::diffusion {

struct Proposal {
  int32_t token = -1;
  double confidence = 0;  // meaningless for random / origin (the caller scores those)
};

class RowScorer {
 public:
  RowScorer(const SamplerConfig& config, int vocab_size);

  // `logits`: the conditional row (vocab_size floats); `uncond`: the unconditional row when
  // classifier-free guidance is on (else nullptr), combined as u + (cfg_scale + 1) * (c - u).
  // `u_token` in (0, 1) drives the x0 draw when temperature > 0. `position` only labels errors.
  // Throws Error(kInvalidArgument) if the row has a NaN or no finite candidate.
  Proposal Score(const float* logits, const float* uncond, double u_token, int position);

 private:
  void ApplyTopP();
  void ApplyTopK();

  SamplerConfig config_;
  int vocab_;
  bool dream_;
  bool filtered_;
  std::vector<float> raw_;  // CFG-combined row (only used when cfg_scale > 0)
  std::vector<float> z_;    // working logits: tempered, filtered; -inf = excluded
  std::vector<float> e_;    // exp(z - max z)
  std::vector<int32_t> order_;
  std::vector<float> values_;
};

}  // namespace bicache::diffusion
