// The engine's acceptance check for one request: what Engine::Start refuses, in one place, so the
// server can run the same check before it queues a request instead of repeating it.
#pragma once

#include "engine/request.h"
#include "model/config.h"

namespace bicache::engine {

// Throws FieldError(kInvalidArgument) naming fields as `{field}` (util/field_error.h), or
// Error(kInvalidArgument), for: an invalid sampler (diffusion::Validate; the caller fills
// sampler.mask_id first), an empty prompt, prompt + gen_length over the context, a prompt token
// outside the vocabulary, and classifier-free guidance with a prefix-reusing cache mode.
void CheckRequest(const RequestOptions& options, const model::ModelConfig& config);

}  // namespace bicache::engine
