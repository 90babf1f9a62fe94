#include "cache/prefix_store_state.h"

#include "util/error.h"

namespace bicache::cache {

void PrefixStoreState::Touch(PrefixEntry& entry) {
  lru.splice(lru.end(), lru, entry.lru_position);
}

void PrefixStoreState::Pin(PrefixEntry& entry) {
  if (entry.pins++ == 0) bytes_pinned += entry.bytes;
}

void PrefixStoreState::Unpin(PrefixEntry& entry, RetiredPayloads& retired) {
  if (--entry.pins > 0) return;
  bytes_pinned -= entry.bytes;
  if (!store_alive) {
    Evict(entry, retired);
  } else if (bytes_used > budget) {  // a SetBudget shrink waited for this pin
    EvictUntilFits(0, retired);
  }
}

void PrefixStoreState::EvictUntilFits(size_t incoming_bytes, RetiredPayloads& retired) {
  EvictDownTo(incoming_bytes < budget ? budget - incoming_bytes : 0, retired);
}

void PrefixStoreState::EvictDownTo(size_t limit, RetiredPayloads& retired) {
  auto it = lru.begin();
  while (it != lru.end() && bytes_used > limit) {
    PrefixEntry* entry = *it++;  // advance first: Evict erases the entry's list node
    if (entry->pins == 0) Evict(*entry, retired);
  }
}

void PrefixStoreState::Evict(PrefixEntry& entry, RetiredPayloads& retired) {
  if (entry.pins != 0) throw Error(ErrorKind::kInternal, "prefix store: evicting a pinned entry");
  retired.push_back(std::move(entry.payload));
  tree.Erase(entry.tokens.view());
  lru.erase(entry.lru_position);
  bytes_used -= entry.bytes;
  ++evictions;
  entries.erase(entry.id);  // destroys `entry`
}

PrefixEntry* PrefixStoreState::EntryById(uint64_t id) const {
  auto it = entries.find(id);
  if (it == entries.end())
    throw Error(ErrorKind::kInternal, "prefix store: tree names a lost entry");
  return it->second.get();
}

}  // namespace bicache::cache
