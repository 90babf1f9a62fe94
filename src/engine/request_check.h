// The engine's acceptance check for one request: every semantic rule a request must meet (the
// sampler's ranges and combinations, the context length, the vocabulary, the block grid of a
// block-diffusion model, cfg with a prefix-reusing cache), in one place. Engine::Start runs it;
// the server runs it before it queues a request, so nothing Start would refuse is queued; the CLI
// and the API render its FieldErrors in their own field names.
#pragma once

#include "engine/request.h"
#include "model/config.h"

namespace bicache::engine {

// Throws FieldError(kInvalidArgument) naming fields as `{field}` (util/field_error.h) for: an
// invalid sampler (diffusion::Validate; the caller fills sampler.mask_id first), an empty prompt,
// prompt + gen_length over the context (code "context_length_exceeded"), a prompt token outside
// the vocabulary, top_k over the vocabulary, a block-diffusion model's gen_length that is not
// whole blocks, and classifier-free guidance with a prefix-reusing cache mode (or on a
// block-diffusion model, as is the dual cache).
void CheckRequest(const RequestOptions& options, const model::ModelConfig& config);

// The block length a request denoises with. A block-diffusion model denoises its own block
// (ModelConfig::denoise_block): `requested` 0 or that length gives it, any other is a
// FieldError naming {block_length}. A bidirectional model takes `requested` as it is.
int ModelBlockLength(const model::ModelConfig& config, int requested);

}  // namespace bicache::engine
