#include "engine/request_check.h"

#include <string>

#include "diffusion/sampler_config.h"
#include "util/field_error.h"

namespace bicache::engine {
namespace {

[[noreturn]] void Invalid(const std::string& text, std::string code = "") {
  throw FieldError(ErrorKind::kInvalidArgument, text, std::move(code));
}

void CheckBlockModel(const RequestOptions& opt, const model::ModelConfig& c) {
  const int unit = ModelBlockLength(c, opt.sampler.block_length);
  if (opt.sampler.gen_length <= 0 || opt.sampler.gen_length % unit != 0) {
    Invalid("this block-diffusion model denoises blocks of " + std::to_string(unit) +
            " tokens: {gen_length} must be a positive multiple of " + std::to_string(unit) +
            " (got " + std::to_string(opt.sampler.gen_length) + ")");
  }
  if (opt.sampler.cfg_scale > 0) {
    Invalid("classifier-free guidance ({cfg}) is not supported for block-diffusion models");
  }
  if (opt.cache.dual) {
    Invalid("{cache} " + opt.cache.ToString() +
            ": a block-diffusion model keeps the K/V of every finished block already; the dual "
            "cache is for bidirectional models");
  }
}

// Worded as OpenAI words it, with the request's own field names.
void CheckContext(int prompt, int gen, int context) {
  const std::string head =
      "This model's maximum context length is " + std::to_string(context) + " tokens. However, ";
  if (prompt >= context) {
    Invalid(head + "there are " + std::to_string(prompt) +
                " tokens in the {prompt}, which leaves no room for the completion. Please reduce "
                "the length of the {prompt}.",
            "context_length_exceeded");
  }
  if (int64_t{prompt} + gen > context) {
    Invalid(head + "you requested " + std::to_string(int64_t{prompt} + gen) + " tokens (" +
                std::to_string(prompt) + " in the prompt, " + std::to_string(gen) +
                " for the completion). Please reduce the length of the prompt or {gen_length}.",
            "context_length_exceeded");
  }
}

}  // namespace

int ModelBlockLength(const model::ModelConfig& c, int requested) {
  if (!c.block_causal()) return requested;
  const int unit = c.denoise_block();
  if (requested != 0 && requested != unit) {
    Invalid("{block_length} " + std::to_string(requested) +
            ": this block-diffusion model denoises its own blocks of " + std::to_string(unit) +
            " tokens (omit {block_length} or give " + std::to_string(unit) + ")");
  }
  return unit;
}

void CheckRequest(const RequestOptions& opt, const model::ModelConfig& c) {
  if (c.block_causal()) CheckBlockModel(opt, c);
  if (!c.block_causal() && opt.cache.prefix == PrefixReuse::kExact) {
    Invalid(
        "{cache} prefix (exact reuse at every layer) is for block-diffusion models; in a "
        "bidirectional model the prefix's K/V depend on what follows it: use bicache");
  }
  diffusion::Validate(opt.sampler);
  const int P = static_cast<int>(opt.prompt.size());
  if (P == 0) Invalid("the {prompt} is empty");
  CheckContext(P, opt.sampler.gen_length, c.context_length);
  for (int32_t t : opt.prompt) {
    if (t < 0 || t >= c.n_vocab) {
      Invalid("token id " + std::to_string(t) + " in the {prompt} is outside the vocabulary [0, " +
              std::to_string(c.n_vocab) + ")");
    }
  }
  if (opt.sampler.top_k > c.n_vocab) {
    Invalid("{top_k} must be at most the vocabulary size, " + std::to_string(c.n_vocab) + " (got " +
            std::to_string(opt.sampler.top_k) + ")");
  }
  if (opt.sampler.cfg_scale > 0 && opt.cache.reuses_prefix()) {
    Invalid(
        "classifier-free guidance ({cfg}) masks the prompt, so it cannot reuse a cached prefix: "
        "use {cache} none or dual");
  }
}

}  // namespace bicache::engine
