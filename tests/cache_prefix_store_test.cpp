#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "cache/memory_budget.h"
#include "cache/prefix_store.h"
#include "util/error.h"

namespace bicache::cache {
namespace {

using Tokens = std::vector<int32_t>;

// Stands in for the engine's K/V payload: a size, plus the tokens it was built for so a test can
// check that a pin's payload belongs to the pin's tokens.
struct FakePayload : PrefixPayload {
  FakePayload(size_t size, Tokens built_for) : size(size), built_for(std::move(built_for)) {}
  size_t bytes() const override { return size; }
  size_t size;
  Tokens built_for;
};

std::shared_ptr<const FakePayload> Payload(size_t bytes, Tokens built_for = {}) {
  return std::make_shared<const FakePayload>(bytes, std::move(built_for));
}

const FakePayload& AsFake(const PrefixPin& pin) {
  return static_cast<const FakePayload&>(*pin.payload());
}

Tokens Range(int32_t first, int32_t last) {  // [first, last]
  Tokens out;
  for (int32_t t = first; t <= last; ++t) out.push_back(t);
  return out;
}

Tokens Concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Inserts and drops the pin at once.
void Add(PrefixStore& store, const Tokens& prefix, size_t bytes) {
  store.Insert(prefix, Payload(bytes, prefix));
}

bool Cached(PrefixStore& store, const Tokens& prefix) {
  const std::optional<PrefixPin> pin = store.Lookup(prefix, prefix.size());
  return pin && pin->length() == prefix.size();
}

TEST(PrefixStore, LongestPrefixServesNestedPrefixes) {
  PrefixStore store(1 << 20);
  const Tokens system = Range(1, 10);
  const Tokens system_doc = Concat(system, Range(100, 120));
  Add(store, system, 10);
  Add(store, system_doc, 30);

  const Tokens same_doc = Concat(system_doc, Range(500, 510));
  std::optional<PrefixPin> pin = store.Lookup(same_doc, same_doc.size());
  ASSERT_TRUE(pin);
  EXPECT_EQ(pin->length(), system_doc.size());
  EXPECT_TRUE(std::ranges::equal(pin->tokens(), system_doc));
  EXPECT_EQ(AsFake(*pin).built_for, system_doc);

  // Another document after the same system prompt: served by the system-prompt entry.
  const Tokens other_doc = Concat(system, Range(200, 230));
  pin = store.Lookup(other_doc, other_doc.size());
  ASSERT_TRUE(pin);
  EXPECT_EQ(pin->length(), system.size());
  EXPECT_EQ(AsFake(*pin).built_for, system);

  // max_len below the longer entry: the shorter one.
  pin = store.Lookup(same_doc, system_doc.size() - 1);
  ASSERT_TRUE(pin);
  EXPECT_EQ(pin->length(), system.size());
  // max_len below every entry: a miss.
  pin = store.Lookup(same_doc, system.size() - 1);
  EXPECT_FALSE(pin);
  store.VerifyInvariants();
}

TEST(PrefixStore, PrefixEndingOrDivergingMidEdgeSplitsIt) {
  PrefixStore store(1 << 20);
  Add(store, Range(1, 8), 8);
  Add(store, Range(1, 4), 4);                    // ends inside the edge [1..8]
  Add(store, Concat(Range(1, 3), {70, 71}), 5);  // diverges inside what is left of it
  Add(store, Concat(Range(1, 6), {90}), 7);      // diverges inside [5..8]
  store.VerifyInvariants();
  EXPECT_EQ(store.stats().entries, 4u);

  EXPECT_EQ(store.Lookup(Concat(Range(1, 8), {9}), 100)->length(), 8u);
  EXPECT_EQ(store.Lookup(Concat(Range(1, 3), {70, 71, 72}), 100)->length(), 5u);
  EXPECT_EQ(store.Lookup(Concat(Range(1, 6), {90, 91}), 100)->length(), 7u);
  EXPECT_EQ(store.Lookup(Range(1, 7), 100)->length(), 4u);
  EXPECT_FALSE(store.Lookup(Range(1, 3), 100));  // a branch point, not an entry
}

TEST(PrefixStore, LookupDivergingInsideAnEdgeMisses) {
  PrefixStore store(1 << 20);
  Add(store, Range(1, 8), 8);
  EXPECT_FALSE(store.Lookup(Concat(Range(1, 5), {0, 7, 8}), 100));
  EXPECT_FALSE(store.Lookup(Range(1, 7), 100));  // ends inside the edge
  EXPECT_FALSE(store.Lookup(Tokens{}, 100));
  EXPECT_FALSE(store.Lookup(Range(1, 8), 0));
}

TEST(PrefixStore, HitsRequireEveryTokenOfTheEntry) {
  PrefixStore store(1 << 20);
  Add(store, Range(1, 6), 6);
  Add(store, Tokens{1, 2, 4}, 3);  // same length as [1 2 3], other tokens
  // Shares 5 of the 6 tokens of [1..6]: no hit on it.
  EXPECT_FALSE(store.Lookup(Concat(Range(1, 5), {60, 61}), 100));
  EXPECT_FALSE(store.Lookup(Tokens{1, 2, 3}, 100));
  std::optional<PrefixPin> pin = store.Lookup(Tokens{1, 2, 4, 4}, 100);
  ASSERT_TRUE(pin);
  EXPECT_EQ(AsFake(*pin).built_for, (Tokens{1, 2, 4}));
}

TEST(PrefixStore, CountsQueriesHitsMissesInserts) {
  PrefixStore store(1 << 20);
  Add(store, Range(1, 4), 40);
  store.Lookup(Range(1, 5), 100);
  store.Lookup(Range(2, 5), 100);
  store.Lookup(Range(1, 4), 100);
  const PrefixStoreStats s = store.stats();
  EXPECT_EQ(s.queries, 3u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.inserts, 1u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes_used, 40u);
  EXPECT_EQ(s.bytes_pinned, 0u);
  EXPECT_EQ(s.budget, size_t{1} << 20);
}

TEST(PrefixStore, EvictsLeastRecentlyUsedFirst) {
  PrefixStore store(300);
  const Tokens a = Range(1, 3), b = Range(10, 13), c = Range(20, 23), d = Range(30, 33);
  Add(store, a, 100);
  Add(store, b, 100);
  Add(store, c, 100);
  ASSERT_TRUE(store.Lookup(a, a.size()));  // a is now the most recent; b the least
  Add(store, d, 100);
  EXPECT_EQ(store.stats().evictions, 1u);
  EXPECT_FALSE(Cached(store, b));
  // Recency now (old -> new): c, a, d.
  Add(store, b, 150);  // needs 150: evicts c, then a
  EXPECT_EQ(store.stats().evictions, 3u);
  EXPECT_FALSE(Cached(store, c));
  EXPECT_FALSE(Cached(store, a));
  EXPECT_TRUE(Cached(store, d));
  EXPECT_TRUE(Cached(store, b));
  EXPECT_EQ(store.stats().bytes_used, 250u);
  store.VerifyInvariants();
}

TEST(PrefixStore, EvictsAnEntryWithNestedEntriesBelowIt) {
  PrefixStore store(200);
  Add(store, Range(1, 4), 100);
  Add(store, Range(1, 8), 100);
  ASSERT_TRUE(store.Lookup(Range(1, 8), 8));  // touch the longer one
  Add(store, Range(50, 52), 100);             // evicts [1..4], an inner node of the tree
  EXPECT_EQ(store.Lookup(Range(1, 9), 100)->length(), 8u);
  EXPECT_FALSE(Cached(store, Range(1, 4)));
  store.VerifyInvariants();
}

TEST(PrefixStore, PinnedEntriesAreNeverEvicted) {
  PrefixStore store(200);
  const Tokens a = Range(1, 3), b = Range(10, 13), c = Range(20, 23);
  PrefixPin held = store.Insert(a, Payload(100, a));  // least recently used, but pinned
  Add(store, b, 100);
  Add(store, c, 100);  // must evict b, not a
  EXPECT_TRUE(Cached(store, a));
  EXPECT_FALSE(Cached(store, b));
  EXPECT_TRUE(Cached(store, c));
  EXPECT_EQ(store.stats().bytes_pinned, 100u);
}

TEST(PrefixStore, InsertOverBudgetThrowsAndChangesNothing) {
  PrefixStore store(200);
  PrefixPin a = store.Insert(Range(1, 3), Payload(120));
  PrefixPin b = store.Insert(Range(10, 13), Payload(60));
  const PrefixStoreStats before = store.stats();
  std::weak_ptr<const FakePayload> refused;
  try {
    auto payload = Payload(50);
    refused = payload;
    store.Insert(Range(20, 23), std::move(payload));
    FAIL() << "expected kResource";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
    const std::string message = e.what();
    EXPECT_NE(message.find("50 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("budget 200"), std::string::npos) << message;
    EXPECT_NE(message.find("pinned 180"), std::string::npos) << message;
  }
  EXPECT_TRUE(refused.expired());  // the store kept no reference
  const PrefixStoreStats after = store.stats();
  EXPECT_EQ(after.entries, before.entries);
  EXPECT_EQ(after.bytes_used, before.bytes_used);
  EXPECT_EQ(after.bytes_pinned, before.bytes_pinned);
  EXPECT_EQ(after.inserts, before.inserts);
  EXPECT_EQ(after.evictions, before.evictions);
  store.VerifyInvariants();

  // A payload larger than the whole budget fails even in an otherwise empty store, and an
  // unpinned entry survives that failure.
  PrefixStore small(100);
  Add(small, Range(1, 2), 40);
  try {
    small.Insert(Range(5, 6), Payload(101));
    FAIL() << "expected kResource";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kResource);
  }
  EXPECT_TRUE(Cached(small, Range(1, 2)));
  EXPECT_EQ(small.stats().evictions, 0u);
}

TEST(PrefixStore, RejectsEmptyPrefixAndNullPayload) {
  PrefixStore store(100);
  try {
    store.Insert(Tokens{}, Payload(1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
  try {
    store.Insert(Tokens{1}, nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
  EXPECT_EQ(store.stats().entries, 0u);
}

TEST(PrefixStore, PinnedBytesReturnToZeroWhenPinsDropInAnyOrder) {
  PrefixStore store(1000);
  const Tokens a = Range(1, 3), b = Range(10, 13);
  std::vector<PrefixPin> pins;
  pins.push_back(store.Insert(a, Payload(100)));
  pins.push_back(store.Insert(b, Payload(200)));
  pins.push_back(*store.Lookup(a, 100));
  pins.push_back(*store.Lookup(b, 100));
  EXPECT_EQ(store.stats().bytes_pinned, 300u);

  PrefixPin moved(std::move(pins[0]));  // the moved-from pin releases nothing
  EXPECT_EQ(pins[0].length(), 0u);
  EXPECT_EQ(pins[0].payload(), nullptr);
  pins[1] = std::move(pins[3]);  // drops one pin on b, takes over another on b
  EXPECT_EQ(store.stats().bytes_pinned, 300u);
  pins.erase(pins.begin() + 1);  // drops b's last pin
  EXPECT_EQ(store.stats().bytes_pinned, 100u);
  std::optional<PrefixPin> maybe = std::move(moved);
  maybe.reset();  // a still held by pins[1] (was pins[2])
  EXPECT_EQ(store.stats().bytes_pinned, 100u);
  moved = store.Insert(a, Payload(100));  // duplicate insert: another pin on a
  pins.clear();
  EXPECT_EQ(store.stats().bytes_pinned, 100u);
  moved = std::move(moved);  // self-move keeps the pin
  EXPECT_EQ(store.stats().bytes_pinned, 100u);
  { PrefixPin sink = std::move(moved); }
  EXPECT_EQ(store.stats().bytes_pinned, 0u);
  EXPECT_EQ(store.stats().bytes_used, 300u);
  store.VerifyInvariants();
}

TEST(PrefixStore, DuplicateInsertReturnsTheExistingEntry) {
  PrefixStore store(1000);
  const Tokens prefix = Range(1, 5);
  PrefixPin first = store.Insert(prefix, Payload(100, {1}));
  std::weak_ptr<const FakePayload> duplicate;
  {
    auto payload = Payload(100, {2});
    duplicate = payload;
    PrefixPin second = store.Insert(prefix, std::move(payload));
    EXPECT_EQ(second.payload(), first.payload());
    EXPECT_EQ(AsFake(second).built_for, Tokens{1});
    const PrefixStoreStats s = store.stats();
    EXPECT_EQ(s.inserts, 1u);
    EXPECT_EQ(s.entries, 1u);
    EXPECT_EQ(s.bytes_used, 100u);
    EXPECT_EQ(s.bytes_pinned, 100u);
  }
  EXPECT_TRUE(duplicate.expired());
  EXPECT_EQ(store.stats().bytes_pinned, 100u);  // `first` still holds it
}

TEST(PrefixStore, SetBudgetShrinksDownToThePins) {
  PrefixStore store(400);
  const Tokens a = Range(1, 3), b = Range(10, 13), c = Range(20, 23), d = Range(30, 33);
  Add(store, a, 100);
  Add(store, b, 100);
  Add(store, c, 100);
  Add(store, d, 100);
  store.SetBudget(250);  // evicts a and b, the least recent
  EXPECT_EQ(store.stats().bytes_used, 200u);
  EXPECT_EQ(store.stats().budget, 250u);
  EXPECT_FALSE(Cached(store, a));
  EXPECT_FALSE(Cached(store, b));

  std::optional<PrefixPin> held = store.Lookup(c, 100);  // recency: d, c
  store.SetBudget(50);  // d goes; c is pinned and stays although over budget
  EXPECT_EQ(store.stats().bytes_used, 100u);
  EXPECT_EQ(store.stats().entries, 1u);
  store.VerifyInvariants();
  held.reset();  // the surplus goes as soon as the pin drops
  EXPECT_EQ(store.stats().bytes_used, 0u);
  EXPECT_EQ(store.stats().entries, 0u);
  EXPECT_EQ(store.stats().evictions, 4u);
  store.VerifyInvariants();
}

TEST(PrefixStore, EvictDownToKeepsTheBudgetAndSparesPins) {
  PrefixStore store(400);
  const Tokens a = Range(1, 3), b = Range(10, 13), c = Range(20, 23);
  Add(store, a, 100);
  Add(store, b, 100);
  Add(store, c, 100);
  EXPECT_EQ(store.EvictDownTo(150), 100u);  // a and b, the least recent
  EXPECT_EQ(store.stats().budget, 400u);
  EXPECT_FALSE(Cached(store, a));
  EXPECT_FALSE(Cached(store, b));
  std::optional<PrefixPin> held = store.Lookup(c, 100);
  EXPECT_EQ(store.EvictDownTo(0), 100u);  // c is pinned
  EXPECT_EQ(store.stats().evictions, 2u);
  store.VerifyInvariants();
}

TEST(PrefixStore, EvictedAndAbandonedPayloadsAreFreed) {
  std::weak_ptr<const FakePayload> evicted, unpinned, pinned;
  std::optional<PrefixPin> survivor;
  {
    PrefixStore store(100);
    auto p = Payload(100);
    evicted = p;
    store.Insert(Range(1, 2), std::move(p));
    p = Payload(50);
    unpinned = p;
    store.Insert(Range(3, 4), std::move(p));  // evicts [1 2]
    EXPECT_TRUE(evicted.expired());
    p = Payload(50);
    pinned = p;
    survivor = store.Insert(Range(5, 6), std::move(p));
  }
  // The store is gone: its unpinned entry went with it, the pinned one lives on in the pin.
  EXPECT_TRUE(unpinned.expired());
  ASSERT_FALSE(pinned.expired());
  EXPECT_TRUE(std::ranges::equal(survivor->tokens(), Tokens{5, 6}));
  EXPECT_EQ(survivor->payload()->bytes(), 50u);
  survivor.reset();
  EXPECT_TRUE(pinned.expired());
}

// Several threads look up, insert and drop pins over a small alphabet under a small budget, so
// splits, merges, evictions, duplicate inserts and budget refusals all happen concurrently.
TEST(PrefixStore, ConcurrentUseKeepsInvariants) {
  constexpr size_t kBudget = 1000;
  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 3000;
  PrefixStore store(kBudget);
  std::atomic<uint64_t> refusals{0}, wrong_payloads{0}, bad_matches{0};

  auto worker = [&](uint32_t seed) {
    std::mt19937 rng(seed);
    auto random_tokens = [&](size_t max_len) {
      Tokens out(1 + rng() % max_len);
      for (int32_t& t : out) t = static_cast<int32_t>(rng() % 3);
      return out;
    };
    std::vector<PrefixPin> held;
    for (int op = 0; op < kOpsPerThread; ++op) {
      const uint32_t action = rng() % 10;
      if (action < 5) {
        const Tokens query = random_tokens(10);
        const size_t max_len = rng() % 12;
        std::optional<PrefixPin> pin = store.Lookup(query, max_len);
        if (pin) {
          const auto tokens = pin->tokens();
          if (tokens.size() > max_len || !std::equal(tokens.begin(), tokens.end(), query.begin())) {
            ++bad_matches;
          }
          if (!std::ranges::equal(AsFake(*pin).built_for, tokens)) ++wrong_payloads;
          if (held.size() < 3) held.push_back(std::move(*pin));
        }
      } else if (action < 8) {
        const Tokens prefix = random_tokens(8);
        try {
          PrefixPin pin = store.Insert(prefix, Payload(50 + rng() % 150, prefix));
          if (!std::ranges::equal(pin.tokens(), prefix)) ++bad_matches;
          if (!std::ranges::equal(AsFake(pin).built_for, prefix)) ++wrong_payloads;
          if (held.size() < 3) held.push_back(std::move(pin));
        } catch (const Error& e) {
          if (e.kind() != ErrorKind::kResource) throw;
          ++refusals;
        }
      } else if (!held.empty()) {
        held.erase(held.begin() + rng() % held.size());  // drop a random pin
      }
      if (op % 500 == 0) store.VerifyInvariants();
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, 1234u + t);
  // Meanwhile: read stats and move the budget up and down.
  for (int i = 0; i < 200; ++i) {
    const PrefixStoreStats s = store.stats();
    EXPECT_LE(s.bytes_pinned, s.bytes_used);
    EXPECT_EQ(s.hits + s.misses, s.queries);
    store.SetBudget(i % 2 ? kBudget : kBudget / 2);
    std::this_thread::yield();
  }
  store.SetBudget(kBudget);
  for (std::thread& t : threads) t.join();

  EXPECT_EQ(bad_matches.load(), 0u);
  EXPECT_EQ(wrong_payloads.load(), 0u);
  const PrefixStoreStats s = store.stats();
  EXPECT_EQ(s.bytes_pinned, 0u);
  EXPECT_LE(s.bytes_used, kBudget);
  EXPECT_EQ(s.entries, s.inserts - s.evictions);
  EXPECT_EQ(s.queries, s.hits + s.misses);
  EXPECT_GT(s.hits, 0u);
  EXPECT_GT(s.evictions, 0u);
  store.VerifyInvariants();
}

TEST(MemoryBudget, ParsesMemAvailable) {
  const std::string meminfo =
      "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n";
  EXPECT_EQ(ParseMemAvailableBytes(meminfo), size_t{8000000} * 1024);
  EXPECT_FALSE(ParseMemAvailableBytes("MemTotal: 100 kB\n").has_value());
  EXPECT_FALSE(ParseMemAvailableBytes("MemAvailable: lots\n").has_value());
}

TEST(MemoryBudget, QuarterOfAvailableWithinFloorAndCap) {
  constexpr size_t kGiB = size_t{1} << 30;
  EXPECT_EQ(BudgetForAvailableBytes(16 * kGiB), 4 * kGiB);
  EXPECT_EQ(BudgetForAvailableBytes(kGiB), kBudgetFloorBytes);       // floor
  EXPECT_EQ(BudgetForAvailableBytes(1024 * kGiB), kBudgetCapBytes);  // cap
  EXPECT_EQ(BudgetForAvailableBytes(100 << 20), size_t{50} << 20);   // half of a small machine
  const size_t here = DefaultBudgetBytes();
  EXPECT_GT(here, 0u);
  EXPECT_LE(here, kBudgetCapBytes);
}

}  // namespace
}  // namespace bicache::cache
