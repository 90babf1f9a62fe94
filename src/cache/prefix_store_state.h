// Internal to src/cache: the state a PrefixStore shares with its pins, and the bookkeeping steps
// that run under its mutex. Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cache/prefix_payload.h"
#include "cache/prefix_tree.h"

namespace bicache::cache {

struct PrefixEntry {
  uint64_t id = 0;
  SharedTokens tokens;                           // immutable
  std::shared_ptr<const PrefixPayload> payload;  // immutable
  size_t bytes = 0;                              // payload->bytes(), read once at insert
  uint32_t pins = 0;
  std::list<PrefixEntry*>::iterator lru_position;
};

// Payloads removed under the lock are parked here and freed after it is released, so freeing a
// large payload never stalls other requests. Declare it before the lock guard.
using RetiredPayloads = std::vector<std::shared_ptr<const PrefixPayload>>;

// Every member is guarded by `mutex`; every method expects it held.
struct PrefixStoreState {
  explicit PrefixStoreState(size_t budget_bytes) : budget(budget_bytes) {}

  // Most recently used goes to the back of the LRU order.
  void Touch(PrefixEntry& entry);
  void Pin(PrefixEntry& entry);
  // Drops one pin; an entry left unpinned is evicted if the store is over budget or closed.
  void Unpin(PrefixEntry& entry, RetiredPayloads& retired);
  // Evicts unpinned entries, least recently used first, until used + incoming <= budget or none
  // is left. Evicting an entry that has nested entries below it is fine: in a bidirectional model
  // each prefix's K/V are computed from that prefix alone, so entries never share payload data.
  void EvictUntilFits(size_t incoming_bytes, RetiredPayloads& retired);
  // Evicts unpinned entries, least recently used first, until bytes_used <= limit or only pinned
  // entries are left.
  void EvictDownTo(size_t limit, RetiredPayloads& retired);
  void Evict(PrefixEntry& entry, RetiredPayloads& retired);
  PrefixEntry* EntryById(uint64_t id) const;

  std::mutex mutex;
  size_t budget;
  bool store_alive = true;  // false once the PrefixStore is destroyed; pins may still exist
  PrefixTree tree;          // token paths -> entry ids
  std::unordered_map<uint64_t, std::unique_ptr<PrefixEntry>> entries;
  std::list<PrefixEntry*> lru;  // front = least recently used
  uint64_t next_id = 1;
  size_t bytes_used = 0;
  size_t bytes_pinned = 0;
  uint64_t queries = 0, hits = 0, misses = 0, inserts = 0, evictions = 0;
};

}  // namespace bicache::cache
