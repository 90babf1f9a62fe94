#include "diffusion/row_scorer.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "util/error.h"

namespace bicache::diffusion {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

[[noreturn]] void BadRow(int position, const char* what) {
  throw Error(ErrorKind::kInvalidArgument, std::string("logits row for canvas position ") +
                                               std::to_string(position) + " " + what);
}

}  // namespace

RowScorer::RowScorer(const SamplerConfig& config, int vocab_size)
    : config_(config),
      vocab_(vocab_size),
      dream_(UsesTimestepSchedule(config.algorithm)),
      filtered_(config.top_p < 1.0f || config.top_k > 0),
      z_(vocab_size),
      e_(vocab_size) {
  if (config.cfg_scale > 0) raw_.resize(vocab_size);
}

// Dream's top_p_logits: sort descending, keep the head whose cumulative probability reaches
// top_p plus the token that crosses it. Only the head is sorted: we grow a partial sort until
// the cut is found, which for peaked LM distributions is a few hundred entries, not the vocab.
void RowScorer::ApplyTopP() {
  float m = kNegInf;
  for (int v = 0; v < vocab_; ++v) m = std::max(m, z_[v]);
  double sum = 0;
  int finite = 0;
  for (int v = 0; v < vocab_; ++v) {
    e_[v] = std::exp(z_[v] - m);
    sum += e_[v];
    finite += z_[v] != kNegInf;
  }
  order_.clear();
  for (int v = 0; v < vocab_; ++v) {
    if (z_[v] != kNegInf) order_.push_back(v);
  }
  const auto desc = [&](int32_t a, int32_t b) {
    return z_[a] > z_[b] || (z_[a] == z_[b] && a < b);
  };
  const double limit = static_cast<double>(config_.top_p);
  int keep = finite;  // number of sorted entries kept
  int sorted = 0;
  double cum = 0;
  for (int k = std::min(finite, 256); sorted < finite; k = std::min(finite, k * 4)) {
    std::partial_sort(order_.begin() + sorted, order_.begin() + k, order_.end(), desc);
    bool cut = false;
    for (int j = sorted; j < k; ++j) {
      cum += e_[order_[j]] / sum;
      if (cum > limit) {  // j is the crossing token: kept, everything after it removed
        keep = j + 1;
        cut = true;
        break;
      }
    }
    sorted = k;
    if (cut) break;
  }
  for (int j = keep; j < finite; ++j) z_[order_[j]] = kNegInf;
}

// Dream's top_k_logits: drop entries strictly below the k-th largest value (ties survive).
void RowScorer::ApplyTopK() {
  values_.clear();
  for (int v = 0; v < vocab_; ++v) {
    if (z_[v] != kNegInf) values_.push_back(z_[v]);
  }
  const size_t k = static_cast<size_t>(config_.top_k);
  if (values_.size() <= k) return;
  std::nth_element(values_.begin(), values_.begin() + (k - 1), values_.end(),
                   std::greater<float>());
  const float kth = values_[k - 1];
  for (int v = 0; v < vocab_; ++v) {
    if (z_[v] < kth) z_[v] = kNegInf;
  }
}

Proposal RowScorer::Score(const float* logits, const float* uncond, double u_token, int position) {
  const float* raw = logits;
  if (config_.cfg_scale > 0) {
    if (uncond == nullptr) {
      throw Error(ErrorKind::kInvalidArgument, "uncond_logits are required when cfg_scale > 0");
    }
    const float w = config_.cfg_scale + 1.0f;
    for (int v = 0; v < vocab_; ++v) raw_[v] = uncond[v] + w * (logits[v] - uncond[v]);
    raw = raw_.data();
  }
  const float temperature = config_.temperature;
  const bool tempered = temperature > 0;
  const int32_t mask = config_.mask_id;

  // 1. Working logits (tempered), mask token excluded; reject NaN / +inf rows.
  bool bad = false;
  if (tempered) {
    for (int v = 0; v < vocab_; ++v) {
      bad |= std::isnan(raw[v]) || raw[v] == std::numeric_limits<float>::infinity();
      // Division (not multiplication by 1/T) rounds as Dream's `logits / temperature` does.
      z_[v] = raw[v] / temperature;
    }
  } else {
    for (int v = 0; v < vocab_; ++v) {
      bad |= std::isnan(raw[v]) || raw[v] == std::numeric_limits<float>::infinity();
      z_[v] = raw[v];
    }
  }
  if (bad) BadRow(position, "contains NaN or +infinity");
  if (mask >= 0 && mask < vocab_) z_[mask] = kNegInf;

  // 2. Filters (Dream order: top_p, then top_k).
  if (config_.top_p < 1.0f) ApplyTopP();
  if (config_.top_k > 0) ApplyTopK();

  // 3. Softmax statistics of the working distribution D.
  int32_t best = -1;
  float m = kNegInf;
  for (int v = 0; v < vocab_; ++v) {
    if (z_[v] > m) {  // strict: the first maximum wins, as torch.argmax / max do
      m = z_[v];
      best = v;
    }
  }
  if (best < 0) BadRow(position, "has no finite candidate token");
  double sum = 0;
  for (int v = 0; v < vocab_; ++v) {
    e_[v] = std::exp(z_[v] - m);
    sum += e_[v];
  }

  Proposal out;
  out.token = best;
  if (tempered) {
    // Inverse CDF over D, in index order.
    const double target = u_token * sum;
    double cum = 0;
    int32_t pick = -1, last_nonzero = best;
    for (int v = 0; v < vocab_ && pick < 0; ++v) {
      if (e_[v] == 0) continue;
      last_nonzero = v;
      cum += e_[v];
      if (cum > target) pick = v;
    }
    // Round-off guard: a target within an ulp of the sum lands on the last candidate.
    out.token = pick >= 0 ? pick : last_nonzero;
  }

  switch (config_.algorithm) {
    case Algorithm::kRandom:
    case Algorithm::kOrigin:
      break;
    case Algorithm::kLowConfidence:
      if (!tempered && !filtered_) {
        out.confidence = e_[out.token] / sum;
      } else {
        // Reference: softmax of the untempered, unfiltered logits, gathered at x0.
        float mr = kNegInf;
        for (int v = 0; v < vocab_; ++v) {
          if (v != mask) mr = std::max(mr, raw[v]);
        }
        double sr = 0;
        for (int v = 0; v < vocab_; ++v) {
          if (v != mask) sr += std::exp(static_cast<double>(raw[v]) - mr);
        }
        out.confidence = std::exp(static_cast<double>(raw[out.token]) - mr) / sr;
      }
      break;
    case Algorithm::kMaskgitPlus:
      out.confidence = e_[out.token] / sum;
      break;
    case Algorithm::kTopkMargin: {
      // top1 - top2 of D; e_[best] == 1 by construction.
      float second = 0;
      bool skipped_best = false;
      for (int v = 0; v < vocab_; ++v) {
        if (v == best && !skipped_best) {
          skipped_best = true;
          continue;
        }
        second = std::max(second, e_[v]);
      }
      out.confidence = (static_cast<double>(e_[best]) - second) / sum;
      break;
    }
    case Algorithm::kEntropy: {
      double acc = 0;
      for (int v = 0; v < vocab_; ++v) {
        const double p = e_[v] / sum;
        if (p > 0) acc += p * std::log(p + 1e-10);
      }
      out.confidence = acc;
      break;
    }
  }
  return out;
}

}  // namespace bicache::diffusion
