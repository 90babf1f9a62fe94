// PrefixStoreSet: several PrefixStores under one shared byte budget, model-free.
//
// The engine keeps one store per "layers held" (the deepest layer an entry may serve), so modes
// compared side by side in one process never hand each other entries of the wrong depth. The
// budget is shared: after an insert pushes the sum over it, FitBudget evicts unpinned entries
// (LRU within a store) from the other stores first, then from the store that grew, so the newest
// kind of entry is the last to lose room.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "cache/prefix_store.h"

namespace bicache::cache {

class PrefixStoreSet {
 public:
  explicit PrefixStoreSet(size_t budget_bytes) : budget_(budget_bytes) {}
  PrefixStoreSet(const PrefixStoreSet&) = delete;
  PrefixStoreSet& operator=(const PrefixStoreSet&) = delete;

  // The store for entries holding `layers_held` layers, created empty on first use. Each store's
  // own budget is the whole shared budget (one store alone may use all of it); the references
  // stay valid for the set's lifetime.
  PrefixStore& For(int layers_held);

  // Evicts unpinned entries until the stores together fit the budget, or only pinned entries are
  // left: from every store other than `grown` first (in layers-held order), then from `grown`.
  void FitBudget(PrefixStore* grown);

  // Counters and bytes summed over the stores; `budget` is the shared budget.
  PrefixStoreStats stats() const;

  size_t budget() const { return budget_; }

 private:
  const size_t budget_;
  mutable std::mutex mutex_;  // guards the map (not the stores, which lock themselves)
  std::map<int, std::unique_ptr<PrefixStore>> stores_;
};

}  // namespace bicache::cache
