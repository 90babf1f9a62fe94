// RecentPrefixTracker: where to put an automatic prefix boundary on a plain prompt.
//
// A request that names no prefix can still share one with earlier traffic (the same system prompt,
// the same document with a different question). The tracker remembers the token lists of the last
// `capacity` requests and proposes a boundary by this rule:
//
//   L = the longest common prefix of the request with any remembered request;
//   boundary = L  if  L >= min_tokens  and  L >= min_fraction * request length,  else 0.
//
// The token floor keeps prefixes long enough to be worth a cache entry; the fraction keeps the
// prefix ratio r = prefix / request high enough that BiCache can reuse shallow layers at all
// (the safe depth b(r) grows with r). A request identical to a recent one gets its full length.
//
// Memory is bounded: at most `capacity` requests, each cut to its first `max_tokens_per_request`
// tokens (so L never exceeds that). Thread-safe; SharedPrefixLength scans every remembered request
// (capacity x prompt length comparisons, microseconds next to one forward pass).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace bicache::cache {

struct RecentPrefixOptions {
  size_t capacity = 32;                   // requests remembered
  size_t min_tokens = 32;                 // shortest boundary proposed
  double min_fraction = 0.3;              // boundary / request length, at least
  size_t max_tokens_per_request = 16384;  // tokens kept per remembered request
};

class RecentPrefixTracker {
 public:
  // Throws Error(kInvalidArgument) for capacity 0, max_tokens_per_request 0 or a fraction
  // outside [0, 1].
  explicit RecentPrefixTracker(RecentPrefixOptions options = {});

  // The boundary the rule above proposes for `tokens` (0: none). Does not record `tokens`.
  size_t SharedPrefixLength(std::span<const int32_t> tokens) const;
  // Remembers `tokens`, replacing the oldest remembered request when full. Empty lists are ignored.
  void Observe(std::span<const int32_t> tokens);

  size_t size() const;  // requests remembered now
  const RecentPrefixOptions& options() const { return options_; }

 private:
  const RecentPrefixOptions options_;
  mutable std::mutex mutex_;
  std::vector<std::vector<int32_t>> recent_;  // ring buffer, guarded by mutex_
  size_t next_slot_ = 0;                      // guarded by mutex_
};

}  // namespace bicache::cache
