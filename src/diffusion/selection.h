// Choosing which masked positions a step commits, given one score per candidate position.
#pragma once

#include <vector>

namespace bicache::diffusion {

struct Candidate {
  int position = 0;  // canvas coordinate
  double score = 0;  // higher = commit first
};

// The k highest-scoring candidates (torch.topk), ties broken toward the lower position so the
// result is deterministic. k is clamped to [0, candidates]. Returned in ascending position order.
std::vector<int> SelectTopK(std::vector<Candidate> candidates, int k);

// Fast-dLLM parallel decoding: every candidate with score >= threshold, and always the single
// highest one (so each step commits at least one position). Ascending position order.
std::vector<int> SelectAboveThreshold(const std::vector<Candidate>& candidates, double threshold);

}  // namespace bicache::diffusion
