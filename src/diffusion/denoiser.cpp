#include "diffusion/denoiser.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

#include "diffusion/counter_rng.h"
#include "diffusion/row_scorer.h"
#include "diffusion/schedule.h"
#include "diffusion/selection.h"
#include "util/error.h"

namespace bicache::diffusion {
namespace {

[[noreturn]] void Invalid(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

// Scores `positions` (x0 + confidence), in parallel over rows when OpenMP is on. Each row's
// randomness is keyed by its position, so the result is independent of the thread count.
// Exceptions cannot cross an OpenMP region: the first one is carried out and rethrown.
std::vector<Proposal> ScoreRows(const SamplerConfig& config, int vocab, const CounterRng& rng,
                                int block, int step, const std::vector<int>& positions,
                                const float* logits, const float* uncond) {
  std::vector<Proposal> out(positions.size());
  const int n = static_cast<int>(positions.size());
  std::exception_ptr error;
  // A parallel region costs a fork/join (much more on a loaded machine); only worth it when
  // there is real work -- a couple of rows of a real vocabulary, not a toy one.
  const bool parallel = n > 1 && static_cast<size_t>(n) * static_cast<size_t>(vocab) >= (1u << 17);
  (void)parallel;
#ifdef _OPENMP
#pragma omp parallel if (parallel)
#endif
  {
    RowScorer scorer(config, vocab);  // per-thread scratch (a few vocab-sized buffers)
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (int i = 0; i < n; ++i) {
      const int p = positions[i];
      const size_t row = static_cast<size_t>(p) * static_cast<size_t>(vocab);
      try {
        const double u = rng.Uniform(block, step, p, RngPurpose::kToken);
        out[i] = scorer.Score(logits + row, uncond ? uncond + row : nullptr, u, p);
      } catch (...) {
#ifdef _OPENMP
#pragma omp critical(bicache_diffusion_score_error)
#endif
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace

Denoiser::Denoiser(const SamplerConfig& config, int vocab_size)
    : config_(config), vocab_(vocab_size) {
  Validate(config_);
  if (vocab_size <= 0) Invalid("vocab_size must be > 0 (got " + std::to_string(vocab_size) + ")");
  if (config_.mask_id >= vocab_size) {
    Invalid("mask_id " + std::to_string(config_.mask_id) + " is outside the vocabulary (" +
            std::to_string(vocab_size) + " tokens)");
  }
  for (int32_t id : config_.stop_ids) {
    if (id >= vocab_size) {
      Invalid("stop_ids: token id " + std::to_string(id) + " is outside the vocabulary (" +
              std::to_string(vocab_size) + " tokens)");
    }
  }
  canvas_.assign(config_.gen_length, config_.mask_id);
  committed_.assign(config_.gen_length, 0);
  if (UsesTimestepSchedule(config_.algorithm)) {
    timesteps_ = DreamTimesteps(config_.steps_per_block(), config_.eps);
  }
  StartBlock();
  Advance();
}

std::pair<int, int> Denoiser::current_block() const {
  const int b = std::min(block_, config_.canvas_blocks() - 1);
  const int begin = b * config_.block_length - config_.block_offset;
  return {std::max(0, begin), std::min(config_.gen_length, begin + config_.block_length)};
}

int Denoiser::masked_count() const {
  return static_cast<int>(std::count(committed_.begin(), committed_.end(), 0));
}

std::string_view Denoiser::finish_reason() const {
  if (!done_) return "";
  return stopped_ ? "stop" : "length";
}

bool Denoiser::IsStop(int32_t token) const {
  return std::find(config_.stop_ids.begin(), config_.stop_ids.end(), token) !=
         config_.stop_ids.end();
}

std::vector<int> Denoiser::MaskedInBlock() const {
  const auto [begin, end] = current_block();
  std::vector<int> out;
  for (int p = begin; p < end; ++p) {
    if (!committed_[p]) out.push_back(p);
  }
  return out;
}

int Denoiser::PlannedCount(int masked) const {
  // The last step of a block takes everything left (in LLaDA's split that is exactly the last
  // count; in Dream it is the reference's explicit rule).
  if (LastStepOfBlock()) return masked;
  const int i = block_step_;
  if (UsesTimestepSchedule(config_.algorithm)) {
    return DreamTransferCount(masked, timesteps_[i], timesteps_[i + 1], false);
  }
  return std::min(block_counts_[i], masked);
}

std::vector<int> Denoiser::OriginPlanned() const {
  const bool last = LastStepOfBlock();
  const int i = std::min(block_step_, config_.steps_per_block() - 1);
  const float p = DreamTransferProbability(timesteps_[i], timesteps_[i + 1], last);
  const CounterRng rng{config_.seed};
  std::vector<int> out;
  for (int pos : MaskedInBlock()) {
    // torch.rand(...) < p_transfer; the draw depends on the seed only, so it can be made
    // before the forward (which is what lets empty steps be skipped).
    if (last || rng.Uniform(block_, block_step_, pos, RngPurpose::kTransfer) < p)
      out.push_back(pos);
  }
  return out;
}

void Denoiser::StartBlock() {
  block_step_ = 0;
  if (!UsesTimestepSchedule(config_.algorithm)) {
    block_counts_ =
        LladaTransferCounts(static_cast<int>(MaskedInBlock().size()), config_.steps_per_block());
  }
}

void Denoiser::Advance() {
  while (!done_) {
    const int masked = static_cast<int>(MaskedInBlock().size());
    if (masked == 0) {
      if (block_ + 1 >= config_.canvas_blocks()) {
        done_ = true;  // canvas full; UpdatePrefixAndStop already caught any stop
        return;
      }
      ++block_;
      StartBlock();
      continue;
    }
    if (config_.threshold > 0) return;  // always commits >= 1
    if (config_.algorithm == Algorithm::kOrigin) {
      if (!OriginPlanned().empty()) return;
    } else if (PlannedCount(masked) > 0) {
      return;
    }
    ++block_step_;  // an empty step: skip it (LastStepOfBlock() eventually forces progress)
  }
}

void Denoiser::UpdatePrefixAndStop() {
  const int n = config_.gen_length;
  while (prefix_ < n && committed_[prefix_] && !IsStop(canvas_[prefix_])) ++prefix_;
  if (prefix_ < n && committed_[prefix_]) {  // a stop token with everything before it final
    stopped_ = true;
    stop_pos_ = prefix_;
    for (int p = prefix_ + 1; p < n; ++p) {
      canvas_[p] = config_.stop_ids.front();
      committed_[p] = 1;
    }
    done_ = true;
  } else if (prefix_ == n) {
    done_ = true;
  }
}

std::vector<int> Denoiser::Step(const float* logits, const float* uncond_logits) {
  if (done_) Invalid("Denoiser::Step called after the request finished");
  if (logits == nullptr) Invalid("Denoiser::Step: logits must not be null");
  if (config_.cfg_scale > 0 && uncond_logits == nullptr) {
    Invalid("Denoiser::Step: uncond_logits are required when cfg_scale > 0");
  }
  const CounterRng rng{config_.seed};
  const std::vector<int> masked = MaskedInBlock();

  // 1. Which positions to commit, and which rows must be scored to get there.
  std::vector<int> chosen;
  std::vector<Proposal> proposals;  // parallel to `chosen` once step 2 is done
  const Algorithm alg = config_.algorithm;
  if (alg == Algorithm::kOrigin || alg == Algorithm::kRandom) {  // (threshold excluded by Validate)
    // The choice does not depend on the logits: decide first, score only the chosen rows.
    if (alg == Algorithm::kOrigin) {
      chosen = OriginPlanned();
    } else {
      std::vector<Candidate> cands;
      for (int p : masked) {
        cands.push_back({p, rng.Uniform(block_, block_step_, p, RngPurpose::kConfidence)});
      }
      chosen = SelectTopK(std::move(cands), PlannedCount(static_cast<int>(masked.size())));
    }
    proposals = ScoreRows(config_, vocab_, rng, block_, block_step_, chosen, logits, uncond_logits);
  } else {
    const std::vector<Proposal> all =
        ScoreRows(config_, vocab_, rng, block_, block_step_, masked, logits, uncond_logits);
    std::vector<Candidate> cands(masked.size());
    for (size_t i = 0; i < masked.size(); ++i) {
      double score = all[i].confidence;
      if (config_.alg_temp > 0) {
        // multinomial(softmax(conf / alg_temp), k) without replacement == the k largest of
        // conf / alg_temp + Gumbel noise (Gumbel-top-k); log space cannot underflow.
        const double u = rng.Uniform(block_, block_step_, masked[i], RngPurpose::kSelect);
        score = score / config_.alg_temp - std::log(-std::log(u));
      }
      cands[i] = {masked[i], score};
    }
    chosen = config_.threshold > 0
                 ? SelectAboveThreshold(cands, config_.threshold)
                 : SelectTopK(cands, PlannedCount(static_cast<int>(masked.size())));
    // `chosen` and `masked` are both ascending: pick the matching proposals.
    size_t j = 0;
    for (int p : chosen) {
      while (masked[j] != p) ++j;
      proposals.push_back(all[j]);
    }
  }

  // 2. Commit.
  for (size_t i = 0; i < chosen.size(); ++i) {
    canvas_[chosen[i]] = proposals[i].token;
    committed_[chosen[i]] = 1;
  }
  ++steps_taken_;
  ++block_step_;
  UpdatePrefixAndStop();
  Advance();
  return chosen;
}

}  // namespace bicache::diffusion
