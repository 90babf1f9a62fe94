// PrefixStore: cross-request cache of shared prompt prefixes, thread-safe, model-free.
//
// Entries are keyed by token ids in a radix tree (cache/prefix_tree.h) and own an opaque payload
// (cache/prefix_payload.h) whose bytes count against a budget. Requests hold entries through
// PrefixPin (cache/prefix_pin.h); pinned entries are never evicted.
//
// Typical use, with the payload computed outside any lock:
//   auto pin = store.Lookup(prompt, boundary);                // longest cached prefix <= boundary
//   if (!pin || pin->length() < boundary)
//     pin = store.Insert(prompt.first(boundary), ComputePrefix(prompt.first(boundary)));
// Two requests that miss on the same prefix at once both compute it; the second Insert returns the
// first one's entry (and drops its own payload), so bytes are never counted twice.
//
// Eviction is LRU over unpinned entries; "use" is a Lookup hit or an Insert, releasing a pin is
// not a use. Any unpinned entry can go, including one with nested entries below it (entries never
// share payload data). Tree nodes left without entry and children are pruned and single-child
// chains merged, so the tree never holds more nodes than about twice its entries.
//
// Budget invariant: after every call, bytes_used <= budget, or every entry is pinned (a SetBudget
// shrink below the pinned bytes; the surplus is evicted as the pins drop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "cache/prefix_payload.h"
#include "cache/prefix_pin.h"

namespace bicache::cache {

struct PrefixStoreStats {
  uint64_t queries = 0;    // Lookup calls
  uint64_t hits = 0;       // lookups that returned an entry
  uint64_t misses = 0;     // lookups that returned none
  uint64_t inserts = 0;    // entries created (an Insert that found its prefix cached is not one)
  uint64_t evictions = 0;  // entries removed
  size_t entries = 0;
  size_t bytes_used = 0;    // sum of the entries' payload bytes
  size_t bytes_pinned = 0;  // part of bytes_used held by at least one pin
  size_t budget = 0;
};

class PrefixStore {
 public:
  explicit PrefixStore(size_t budget_bytes);
  // Frees every unpinned entry now; pinned ones are freed as their pins drop.
  ~PrefixStore();
  PrefixStore(const PrefixStore&) = delete;
  PrefixStore& operator=(const PrefixStore&) = delete;

  // The longest cached prefix of `tokens` no longer than `max_len` tokens, pinned, or nullopt.
  // Matches are verified token by token. Counts a query and a hit or a miss.
  std::optional<PrefixPin> Lookup(std::span<const int32_t> tokens, size_t max_len);

  // Caches `payload` for exactly `prefix` and returns it pinned; if that prefix is already cached,
  // returns the existing entry pinned and drops `payload`. Evicts unpinned entries (LRU first) to
  // make room. Throws Error(kResource) and changes nothing if the payload cannot fit even with
  // every unpinned entry evicted; Error(kInvalidArgument) for an empty prefix or a null payload.
  PrefixPin Insert(std::span<const int32_t> prefix, std::shared_ptr<const PrefixPayload> payload);

  // Changes the budget, evicting unpinned entries (LRU first) down to it as far as pins allow.
  void SetBudget(size_t budget_bytes);

  // Evicts unpinned entries (LRU first) until at most `bytes` are used or only pinned entries are
  // left, without changing the budget (for a budget shared by several stores). Returns bytes_used.
  size_t EvictDownTo(size_t bytes);

  // A consistent snapshot (taken under the lock).
  PrefixStoreStats stats() const;

  // Cross-checks tree, entries, LRU order and byte counters; throws Error(kInternal) on a mismatch.
  // Costs a walk over everything; for tests and debugging.
  void VerifyInvariants() const;

 private:
  std::shared_ptr<PrefixStoreState> state_;  // shared with live pins
};

}  // namespace bicache::cache
