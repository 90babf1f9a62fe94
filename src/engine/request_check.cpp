#include "engine/request_check.h"

#include <string>

#include "diffusion/sampler_config.h"
#include "util/field_error.h"

namespace bicache::engine {

void CheckRequest(const RequestOptions& opt, const model::ModelConfig& c) {
  if (c.block_causal()) {
    const int unit = opt.sampler.block_length;  // Engine::Start set the model's
    if (opt.sampler.gen_length <= 0 || opt.sampler.gen_length % unit != 0) {
      throw FieldError(ErrorKind::kInvalidArgument,
                       "this block-diffusion model denoises blocks of " + std::to_string(unit) +
                           " tokens: {gen_length} must be a positive multiple of " +
                           std::to_string(unit) + " (got " +
                           std::to_string(opt.sampler.gen_length) + ")");
    }
    if (opt.sampler.cfg_scale > 0) {
      throw FieldError(ErrorKind::kInvalidArgument,
                       "classifier-free guidance ({cfg}) is not supported for block-diffusion "
                       "models");
    }
    if (opt.cache.dual) {
      throw FieldError(ErrorKind::kInvalidArgument,
                       "{cache} " + opt.cache.ToString() +
                           ": a block-diffusion model keeps the K/V of every finished block "
                           "already; the dual cache is for bidirectional models");
    }
  }
  if (!c.block_causal() && opt.cache.prefix == PrefixReuse::kExact) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{cache} prefix (exact reuse at every layer) is for block-diffusion models; "
                     "in a bidirectional model the prefix's K/V depend on what follows it: use "
                     "bicache");
  }
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
    throw FieldError(ErrorKind::kInvalidArgument,
                     "classifier-free guidance ({cfg}) masks the prompt, so it cannot reuse a "
                     "cached prefix: use {cache} none or dual");
  }
}

}  // namespace bicache::engine
