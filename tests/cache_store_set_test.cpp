// PrefixStoreSet without a model: fake payloads of known sizes stand in for K/V entries.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "cache/store_set.h"

namespace bicache::cache {
namespace {

using Tokens = std::vector<int32_t>;

struct FakePayload : PrefixPayload {
  explicit FakePayload(size_t size) : size(size) {}
  size_t bytes() const override { return size; }
  size_t size;
};

// Inserts `prefix` with a payload of `bytes` and drops the pin at once (the entry is evictable).
void Add(PrefixStore& store, const Tokens& prefix, size_t bytes) {
  store.Insert(prefix, std::make_shared<const FakePayload>(bytes));
}

bool Cached(PrefixStore& store, const Tokens& prefix) {
  const std::optional<PrefixPin> pin = store.Lookup(prefix, prefix.size());
  return pin && pin->length() == prefix.size();
}

TEST(PrefixStoreSet, OneStorePerLayersHeld) {
  PrefixStoreSet set(1000);
  PrefixStore& a = set.For(2);
  PrefixStore& b = set.For(4);
  EXPECT_NE(&a, &b);
  EXPECT_EQ(&a, &set.For(2));
  Add(a, {1, 2, 3}, 10);
  EXPECT_TRUE(Cached(a, {1, 2, 3}));
  EXPECT_FALSE(Cached(b, {1, 2, 3}));  // entries of another depth are never served
}

TEST(PrefixStoreSet, StatsAreSummedOverStores) {
  PrefixStoreSet set(1000);
  Add(set.For(1), {1, 2}, 100);
  Add(set.For(3), {5, 6}, 200);
  Add(set.For(3), {7, 8}, 50);
  EXPECT_TRUE(Cached(set.For(1), {1, 2}));
  EXPECT_FALSE(Cached(set.For(3), {9}));
  const PrefixStoreStats s = set.stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.inserts, 3u);
  EXPECT_EQ(s.bytes_used, 350u);
  EXPECT_EQ(s.queries, 2u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.budget, 1000u);
}

TEST(PrefixStoreSet, FitBudgetEvictsFromTheOtherStoresFirst) {
  PrefixStoreSet set(1000);
  PrefixStore& old_store = set.For(1);
  PrefixStore& grown = set.For(2);
  Add(old_store, {1}, 300);
  Add(old_store, {2}, 300);
  Add(grown, {3}, 300);
  Add(grown, {4}, 300);  // 1200 > 1000: each store alone fits, the sum does not
  set.FitBudget(&grown);
  EXPECT_LE(set.stats().bytes_used, 1000u);
  EXPECT_TRUE(Cached(grown, {3}));
  EXPECT_TRUE(Cached(grown, {4}));
  EXPECT_FALSE(Cached(old_store, {1}));  // LRU within the other store goes first
  EXPECT_TRUE(Cached(old_store, {2}));
}

TEST(PrefixStoreSet, FitBudgetFallsBackToTheGrownStore) {
  PrefixStoreSet set(1000);
  PrefixStore& other = set.For(1);
  PrefixStore& grown = set.For(2);
  Add(other, {1}, 200);
  std::optional<PrefixPin> pinned = other.Lookup(Tokens{1}, 1);  // the other store cannot give
  Add(grown, {2}, 500);
  Add(grown, {3}, 500);
  set.FitBudget(&grown);
  EXPECT_LE(set.stats().bytes_used, 1000u);
  EXPECT_TRUE(Cached(other, {1}));
  EXPECT_FALSE(Cached(grown, {2}));  // oldest of the grown store
  EXPECT_TRUE(Cached(grown, {3}));
}

TEST(PrefixStoreSet, FitBudgetLeavesPinnedEntries) {
  PrefixStoreSet set(100);
  PrefixStore& a = set.For(1);
  PrefixStore& b = set.For(2);
  const PrefixPin pa = a.Insert(Tokens{1}, std::make_shared<const FakePayload>(80));
  const PrefixPin pb = b.Insert(Tokens{2}, std::make_shared<const FakePayload>(80));
  set.FitBudget(&b);  // nothing can go: over budget until a pin drops
  EXPECT_EQ(set.stats().bytes_used, 160u);
  EXPECT_EQ(set.stats().bytes_pinned, 160u);
}

TEST(PrefixStoreSet, FitBudgetUnderBudgetEvictsNothing) {
  PrefixStoreSet set(1000);
  Add(set.For(1), {1}, 400);
  Add(set.For(2), {2}, 400);
  set.FitBudget(&set.For(2));
  EXPECT_EQ(set.stats().entries, 2u);
  EXPECT_EQ(set.stats().evictions, 0u);
}

}  // namespace
}  // namespace bicache::cache
