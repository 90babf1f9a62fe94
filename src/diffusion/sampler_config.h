// Denoising sampler settings for one request, and their validation.
//
// Two families of algorithms share one canvas state machine (denoiser.h):
//   LLaDA `generate`:      low_confidence, random   (fixed per-block transfer counts)
//   Dream `diffusion_generate`: origin, maskgit_plus, topk_margin, entropy (eps timestep schedule)
// Everything here is model-free: the engine runs forwards and hands rows of logits over.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace bicache::diffusion {

enum class Algorithm {
  kLowConfidence,  // LLaDA: confidence = softmax(logits)[x0]
  kRandom,         // LLaDA: confidence = uniform random number
  kOrigin,         // Dream: every masked position flips with probability 1 - s/t
  kMaskgitPlus,    // Dream: confidence = top probability
  kTopkMargin,     // Dream: confidence = top1 - top2 probability
  kEntropy,        // Dream: confidence = sum p log p (negative entropy)
};

// "low_confidence", "random", "origin", "maskgit_plus", "topk_margin", "entropy". Anything else
// throws FieldError(kInvalidArgument) about {algorithm}, naming the value and listing the valid
// ones.
Algorithm ParseAlgorithm(std::string_view name);
const char* AlgorithmName(Algorithm algorithm);

// True for the Dream family (timestep schedule), false for the LLaDA family (even split).
bool UsesTimestepSchedule(Algorithm algorithm);
// True when the algorithm ranks positions by a model-derived confidence (so a threshold or an
// alg_temp selection means something): low_confidence, maskgit_plus, topk_margin, entropy.
bool HasModelConfidence(Algorithm algorithm);

struct SamplerConfig {
  int gen_length = 32;    // canvas length (tokens generated)
  int steps = 32;         // denoising steps in total (an upper bound: see denoiser.h)
  int block_length = 32;  // semi-autoregressive block; == gen_length means one block
  Algorithm algorithm = Algorithm::kLowConfidence;
  float temperature = 0;  // 0 = argmax
  float top_p = 1;        // nucleus filter on the sampling distribution; 1 = off
  int top_k = 0;          // 0 = off
  float alg_temp = 0;     // Dream: > 0 samples positions from softmax(confidence / alg_temp)
  float eps = 1e-3f;      // Dream: timesteps run from 1 down to eps
  float threshold = 0;    // Fast-dLLM parallel decoding; 0 = off, else in (0, 1)
  float cfg_scale = 0;    // classifier-free guidance; 0 = off (the engine then skips the 2nd pass)
  uint64_t seed = 0;
  int32_t mask_id = -1;           // the model's mask token (required)
  std::vector<int32_t> stop_ids;  // EOS / end-of-turn; the first one pads after a stop

  // Block-diffusion models (sdar, fast-dllm-v2) lay blocks on absolute positions: the prompt's
  // last partial block is finished by the canvas. block_offset = prompt tokens already in the
  // canvas's first block (prompt length mod block_length); the first block is then
  // block_length - block_offset long and one more, block_offset long, ends the canvas.
  int block_offset = 0;

  // Blocks' worth of steps: {steps} is spread over gen_length / block_length blocks.
  int num_blocks() const { return gen_length / block_length; }
  int steps_per_block() const { return steps / num_blocks(); }
  // Blocks the canvas is denoised in (num_blocks(), plus one when block_offset > 0).
  int canvas_blocks() const {
    return (block_offset + gen_length + block_length - 1) / block_length;
  }
};

// Throws FieldError(kInvalidArgument) for every invalid value or combination; the message names
// the offending fields as {gen_length}, {steps}, {block_length}, {temperature}, {top_p}, {top_k},
// {eps}, {cfg}, {threshold}, {algorithm}, {alg_temp}, for each front end to spell
// (util/field_error.h). Checks that need the vocabulary size are done by the Denoiser constructor.
void Validate(const SamplerConfig& config);

}  // namespace bicache::diffusion
