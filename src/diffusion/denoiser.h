// One request's canvas and its denoising schedule: the model-free half of diffusion decoding.
//
// The engine owns the forwards. Per step it builds prompt + canvas(), runs the model (twice with
// classifier-free guidance: the second pass with the prompt masked), and passes the logits rows
// of the gen_length canvas positions (for Dream already shifted: row p-1 for position p) to
// Step(), which commits some masked positions. Loop until done().
//
// Schedules (matching the reference implementations):
//  * Blocks: the canvas is split into gen_length / block_length blocks, denoised left to right;
//    each block gets steps_per_block = steps / blocks steps. Only the current block's masked
//    positions are candidates. With block_offset > 0 (block-diffusion models) the blocks sit on
//    the absolute block grid: the first is shorter (it finishes the prompt's last block) and one
//    more, block_offset long, ends the canvas; each still gets steps_per_block steps.
//  * LLaDA (low_confidence, random): the block's masked count at block start is spread over its
//    steps (LladaTransferCounts); the k best positions take their x0.
//  * Dream (maskgit_plus, topk_margin, entropy): ts = linspace(1, eps, steps_per_block + 1); step i
//    commits int(masked * (1 - ts[i+1] / ts[i])) (all remaining on the block's last step), chosen
//    by top-k confidence, or sampled without replacement from softmax(confidence / alg_temp).
//    origin: each masked position commits with probability 1 - s/t (all on the last step).
//    Extension: the Dream reference has no blocks; with block_length < gen_length we run its
//    schedule inside each block with steps_per_block steps (== the reference for one block).
//  * threshold > 0 (Fast-dLLM parallel decoding): each step commits every masked position of the
//    block whose confidence is >= threshold (Fast-dLLM keeps `>=`), and always the most confident
//    one; a block ends when fully unmasked, so `steps` is not used and step() varies.
//
// Steps that would commit nothing are skipped without asking for a forward: the canvas, hence the
// forward's input, would be unchanged, so the skipped step's forward would just be repeated.
// (LLaDA steps > masked tokens; Dream steps where int() truncates to 0; origin steps whose coin
// flips -- drawn from the seed alone -- all fail.) step() therefore counts forwards consumed,
// which is <= steps.
//
// Stops: once a stop token is committed at position p and every position before p is committed,
// the answer is final (nothing before p can change): positions after p become stop_ids[0], the
// request is done, finish_reason() == "stop". Otherwise it ends when the canvas is full ("length").
//
// Randomness comes from a counter-based generator keyed by (seed, block, step, position,
// purpose): the same seed and logits give the same canvas for any thread count or batch.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "diffusion/sampler_config.h"

namespace bicache::diffusion {

class Denoiser {
 public:
  // Validates `config` (Error(kInvalidArgument) naming the flag), and against `vocab_size`:
  // mask_id and every stop id must be < vocab_size.
  Denoiser(const SamplerConfig& config, int vocab_size);

  bool done() const { return done_; }
  int step() const { return steps_taken_; }  // Step() calls so far (= forwards consumed)
  // [begin, end) of the current block, canvas coordinates. Step() reads only the rows of masked
  // positions inside it, so an engine may compute (or leave garbage in) only those rows.
  std::pair<int, int> current_block() const;
  // gen_length tokens; mask_id where still masked.
  const std::vector<int32_t>& canvas() const { return canvas_; }
  bool committed(int position) const { return committed_.at(position) != 0; }
  int masked_count() const;  // masked positions left on the whole canvas

  // Commits this step's tokens. `logits`: [gen_length, vocab] row-major, cond. pass;
  // `uncond_logits`: same shape, required iff cfg_scale > 0. Returns the positions sampled this
  // step (ascending; never empty). Positions padded after a stop are not included.
  // Throws Error(kInvalidArgument) when called after done(), on null/missing inputs, or a row
  // with NaN / +inf / no finite candidate.
  std::vector<int> Step(const float* logits, const float* uncond_logits = nullptr);

  // Length of the leftmost run of committed positions: tokens [0, committed_prefix()) are final
  // and may be streamed (clip at answer_length(): after a stop the padding counts as committed).
  int committed_prefix() const { return stopped_ ? config_.gen_length : prefix_; }
  // "stop" (a stop token ended the answer), "length" (canvas full without one), "" while running.
  std::string_view finish_reason() const;
  // Tokens before the stop token when finished by "stop", else gen_length.
  int answer_length() const { return stopped_ ? stop_pos_ : config_.gen_length; }

  const SamplerConfig& config() const { return config_; }

 private:
  bool IsStop(int32_t token) const;
  std::vector<int> MaskedInBlock() const;
  bool LastStepOfBlock() const { return block_step_ >= config_.steps_per_block() - 1; }
  int PlannedCount(int masked) const;      // top-k count of the current step
  std::vector<int> OriginPlanned() const;  // origin: positions whose coin flip passes
  void StartBlock();
  void Advance();  // skip empty steps / finished blocks
  void UpdatePrefixAndStop();

  SamplerConfig config_;
  int vocab_;
  std::vector<int32_t> canvas_;
  std::vector<uint8_t> committed_;
  std::vector<int> block_counts_;  // LLaDA: per-step counts of the current block
  std::vector<float> timesteps_;   // Dream: linspace(1, eps, steps_per_block + 1)
  int block_ = 0;
  int block_step_ = 0;  // schedule index inside the block (skipped steps included)
  int steps_taken_ = 0;
  int prefix_ = 0;
  int stop_pos_ = -1;
  bool stopped_ = false;
  bool done_ = false;
};

}  // namespace bicache::diffusion
