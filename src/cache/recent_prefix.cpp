#include "cache/recent_prefix.h"

#include <algorithm>

#include "util/error.h"

namespace bicache::cache {

RecentPrefixTracker::RecentPrefixTracker(RecentPrefixOptions options) : options_(options) {
  if (options_.capacity == 0 || options_.max_tokens_per_request == 0) {
    throw Error(ErrorKind::kInvalidArgument,
                "recent prefix tracker: capacity and max_tokens_per_request must be at least 1");
  }
  if (!(options_.min_fraction >= 0.0 && options_.min_fraction <= 1.0)) {
    throw Error(ErrorKind::kInvalidArgument,
                "recent prefix tracker: min_fraction must lie in [0, 1]");
  }
  recent_.reserve(options_.capacity);
}

size_t RecentPrefixTracker::SharedPrefixLength(std::span<const int32_t> tokens) const {
  size_t longest = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::vector<int32_t>& other : recent_) {
      const size_t n = std::min(other.size(), tokens.size());
      if (n <= longest) continue;
      const auto diverge = std::mismatch(tokens.begin(), tokens.begin() + n, other.begin()).first;
      longest = std::max(longest, static_cast<size_t>(diverge - tokens.begin()));
    }
  }
  if (longest == 0 || longest < options_.min_tokens) return 0;
  if (static_cast<double>(longest) < options_.min_fraction * static_cast<double>(tokens.size())) {
    return 0;
  }
  return longest;
}

void RecentPrefixTracker::Observe(std::span<const int32_t> tokens) {
  if (tokens.empty()) return;
  // Copy outside the lock.
  std::vector<int32_t> kept(
      tokens.begin(), tokens.begin() + std::min(tokens.size(), options_.max_tokens_per_request));
  std::lock_guard<std::mutex> lock(mutex_);
  if (recent_.size() < options_.capacity) {
    recent_.push_back(std::move(kept));
  } else {
    recent_[next_slot_].swap(kept);  // the old list is freed after the lock, with `kept`
  }
  next_slot_ = (next_slot_ + 1) % options_.capacity;
}

size_t RecentPrefixTracker::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recent_.size();
}

}  // namespace bicache::cache
