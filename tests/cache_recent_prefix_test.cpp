#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "cache/recent_prefix.h"
#include "util/error.h"

namespace bicache::cache {
namespace {

using Tokens = std::vector<int32_t>;

// `shared` tokens 1..shared, then `rest` tokens unique to `tag`.
Tokens Request(size_t shared, size_t rest, int32_t tag) {
  Tokens out;
  for (size_t i = 0; i < shared; ++i) out.push_back(static_cast<int32_t>(i + 1));
  for (size_t i = 0; i < rest; ++i)
    out.push_back(tag * 1000 + static_cast<int32_t>(i));  // rest < 1000
  return out;
}

TEST(RecentPrefixTracker, NothingObservedNothingShared) {
  RecentPrefixTracker tracker;
  EXPECT_EQ(tracker.SharedPrefixLength(Request(100, 10, 1)), 0u);
  EXPECT_EQ(tracker.size(), 0u);
}

TEST(RecentPrefixTracker, ProposesTheSharedSystemPrompt) {
  RecentPrefixTracker tracker({.capacity = 8, .min_tokens = 32, .min_fraction = 0.3});
  tracker.Observe(Request(40, 60, 1));
  EXPECT_EQ(tracker.SharedPrefixLength(Request(40, 60, 2)), 40u);  // 40 of 100 tokens
  // Looking does not record: a third request still only sees the first.
  EXPECT_EQ(tracker.size(), 1u);
}

TEST(RecentPrefixTracker, RequiresMinTokensAndMinFraction) {
  RecentPrefixTracker tracker({.capacity = 8, .min_tokens = 32, .min_fraction = 0.3});
  tracker.Observe(Request(200, 10, 1));
  EXPECT_EQ(tracker.SharedPrefixLength(Request(31, 10, 2)), 0u);    // < 32 tokens
  EXPECT_EQ(tracker.SharedPrefixLength(Request(32, 10, 2)), 32u);   // exactly the floor
  EXPECT_EQ(tracker.SharedPrefixLength(Request(40, 100, 2)), 0u);   // 40 / 140 < 0.3
  EXPECT_EQ(tracker.SharedPrefixLength(Request(60, 140, 2)), 60u);  // 60 / 200 == 0.3
}

TEST(RecentPrefixTracker, TakesTheLongestAmongRecentRequests) {
  RecentPrefixTracker tracker({.capacity = 8, .min_tokens = 4, .min_fraction = 0.0});
  tracker.Observe(Request(50, 5, 1));
  tracker.Observe(Request(80, 5, 2));
  tracker.Observe(Request(60, 5, 3));
  EXPECT_EQ(tracker.SharedPrefixLength(Request(100, 5, 4)), 80u);
  // Identical to a remembered request: its whole length.
  EXPECT_EQ(tracker.SharedPrefixLength(Request(50, 5, 1)), 55u);
}

TEST(RecentPrefixTracker, ForgetsTheOldestBeyondCapacity) {
  RecentPrefixTracker tracker({.capacity = 2, .min_tokens = 4, .min_fraction = 0.0});
  const Tokens first = Request(0, 50, 1);
  tracker.Observe(first);
  tracker.Observe(Request(0, 50, 2));
  EXPECT_EQ(tracker.SharedPrefixLength(first), 50u);
  tracker.Observe(Request(0, 50, 3));
  EXPECT_EQ(tracker.size(), 2u);
  EXPECT_EQ(tracker.SharedPrefixLength(first), 0u);
  EXPECT_EQ(tracker.SharedPrefixLength(Request(0, 50, 2)), 50u);
  tracker.Observe(Request(0, 50, 4));  // wraps around: replaces 2
  EXPECT_EQ(tracker.SharedPrefixLength(Request(0, 50, 2)), 0u);
  EXPECT_EQ(tracker.SharedPrefixLength(Request(0, 50, 3)), 50u);
}

TEST(RecentPrefixTracker, KeepsAtMostMaxTokensPerRequest) {
  RecentPrefixTracker tracker(
      {.capacity = 4, .min_tokens = 4, .min_fraction = 0.0, .max_tokens_per_request = 64});
  tracker.Observe(Request(500, 0, 1));
  EXPECT_EQ(tracker.SharedPrefixLength(Request(500, 0, 1)), 64u);
  tracker.Observe(Tokens{});  // ignored
  EXPECT_EQ(tracker.size(), 1u);
}

TEST(RecentPrefixTracker, RejectsBadOptions) {
  EXPECT_THROW(RecentPrefixTracker({.capacity = 0}), Error);
  EXPECT_THROW(RecentPrefixTracker({.min_fraction = 1.5}), Error);
  EXPECT_THROW(RecentPrefixTracker({.min_fraction = -0.1}), Error);
  EXPECT_THROW(RecentPrefixTracker({.max_tokens_per_request = 0}), Error);
}

TEST(RecentPrefixTracker, ConcurrentObserveAndQuery) {
  RecentPrefixTracker tracker({.capacity = 4, .min_tokens = 8, .min_fraction = 0.1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tracker, t] {
      for (int i = 0; i < 500; ++i) {
        const Tokens request = Request(40, 20, 1 + t * 1000 + i);
        const size_t shared = tracker.SharedPrefixLength(request);
        EXPECT_TRUE(shared == 0 || shared == 40u) << shared;
        tracker.Observe(request);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(tracker.size(), 4u);
  EXPECT_EQ(tracker.SharedPrefixLength(Request(40, 20, 99999)), 40u);
}

}  // namespace
}  // namespace bicache::cache
