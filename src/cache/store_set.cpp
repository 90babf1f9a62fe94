#include "cache/store_set.h"

#include <vector>

namespace bicache::cache {

PrefixStore& PrefixStoreSet::For(int layers_held) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = stores_[layers_held];
  if (!slot) slot = std::make_unique<PrefixStore>(budget_);
  return *slot;
}

void PrefixStoreSet::FitBudget(PrefixStore* grown) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t total = 0;
  for (const auto& [held, store] : stores_) total += store->stats().bytes_used;
  if (total <= budget_) return;
  std::vector<PrefixStore*> order;
  for (const auto& [held, store] : stores_) {
    if (store.get() != grown) order.push_back(store.get());
  }
  if (grown) order.push_back(grown);
  for (PrefixStore* s : order) {
    if (total <= budget_) break;
    const size_t used = s->stats().bytes_used;
    const size_t over = total - budget_;
    total = total - used + s->EvictDownTo(used > over ? used - over : 0);
  }
}

PrefixStoreStats PrefixStoreSet::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  PrefixStoreStats s;
  for (const auto& [held, store] : stores_) {
    const PrefixStoreStats t = store->stats();
    s.queries += t.queries;
    s.hits += t.hits;
    s.misses += t.misses;
    s.inserts += t.inserts;
    s.evictions += t.evictions;
    s.entries += t.entries;
    s.bytes_used += t.bytes_used;
    s.bytes_pinned += t.bytes_pinned;
  }
  s.budget = budget_;
  return s;
}

}  // namespace bicache::cache
