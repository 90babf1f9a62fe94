#include "diffusion/selection.h"

#include <algorithm>

namespace bicache::diffusion {
namespace {

bool Better(const Candidate& a, const Candidate& b) {
  return a.score > b.score || (a.score == b.score && a.position < b.position);
}

}  // namespace

std::vector<int> SelectTopK(std::vector<Candidate> candidates, int k) {
  k = std::clamp(k, 0, static_cast<int>(candidates.size()));
  // Partial sort: O(n log k); n is at most one block (or the canvas).
  std::partial_sort(candidates.begin(), candidates.begin() + k, candidates.end(), Better);
  std::vector<int> out;
  out.reserve(k);
  for (int i = 0; i < k; ++i) out.push_back(candidates[i].position);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> SelectAboveThreshold(const std::vector<Candidate>& candidates, double threshold) {
  std::vector<int> out;
  if (candidates.empty()) return out;
  const Candidate* best = &candidates[0];
  for (const Candidate& c : candidates) {
    if (Better(c, *best)) best = &c;
  }
  for (const Candidate& c : candidates) {
    if (&c == best || c.score >= threshold) out.push_back(c.position);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace bicache::diffusion
