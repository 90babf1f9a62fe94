#include "cache/prefix_store.h"

#include <string>
#include <vector>

#include "cache/prefix_store_state.h"
#include "util/error.h"

namespace bicache::cache {

PrefixStore::PrefixStore(size_t budget_bytes)
    : state_(std::make_shared<PrefixStoreState>(budget_bytes)) {}

PrefixStore::~PrefixStore() {
  RetiredPayloads retired;
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->store_alive = false;
  state_->budget = 0;
  state_->EvictUntilFits(0, retired);  // with budget 0 this takes every unpinned entry
}

std::optional<PrefixPin> PrefixStore::Lookup(std::span<const int32_t> tokens, size_t max_len) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  PrefixStoreState& s = *state_;
  ++s.queries;
  const std::optional<PrefixTree::Match> match = s.tree.LongestMatch(tokens, max_len);
  if (!match) {
    ++s.misses;
    return std::nullopt;
  }
  ++s.hits;
  PrefixEntry* entry = s.EntryById(match->value);
  s.Touch(*entry);
  s.Pin(*entry);
  return PrefixPin(state_, entry);
}

PrefixPin PrefixStore::Insert(std::span<const int32_t> prefix,
                              std::shared_ptr<const PrefixPayload> payload) {
  if (prefix.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "prefix store: cannot cache an empty prefix");
  }
  if (!payload) throw Error(ErrorKind::kInvalidArgument, "prefix store: null prefix payload");
  // Copy the tokens and read the size before taking the lock.
  SharedTokens tokens{std::make_shared<const std::vector<int32_t>>(prefix.begin(), prefix.end()),
                      prefix.size()};
  const size_t bytes = payload->bytes();

  RetiredPayloads retired;  // freed after the lock is released
  std::lock_guard<std::mutex> lock(state_->mutex);
  PrefixStoreState& s = *state_;
  if (const std::optional<PrefixTree::Value> existing = s.tree.Find(prefix)) {
    PrefixEntry* entry = s.EntryById(*existing);
    s.Touch(*entry);
    s.Pin(*entry);
    return PrefixPin(state_, entry);
  }
  // Plan before changing anything: every unpinned entry can be evicted, the pinned ones cannot.
  if (bytes > s.budget || s.bytes_pinned > s.budget - bytes) {
    throw Error(ErrorKind::kResource,
                "prefix cache: caching a " + std::to_string(prefix.size()) +
                    "-token prefix needs " + std::to_string(bytes) + " bytes, budget " +
                    std::to_string(s.budget) + ", pinned " + std::to_string(s.bytes_pinned) +
                    " (held by running requests); raise the prefix cache budget");
  }
  s.EvictUntilFits(bytes, retired);

  auto owned = std::make_unique<PrefixEntry>();
  PrefixEntry* entry = owned.get();
  entry->id = s.next_id++;
  entry->payload = std::move(payload);
  entry->bytes = bytes;
  s.entries.emplace(entry->id, std::move(owned));
  try {
    entry->lru_position = s.lru.insert(s.lru.end(), entry);
    try {
      entry->tokens = s.tree.Insert(tokens, entry->id);
    } catch (...) {
      s.lru.erase(entry->lru_position);
      throw;
    }
  } catch (...) {
    s.entries.erase(entry->id);
    throw;
  }
  s.bytes_used += bytes;
  ++s.inserts;
  s.Pin(*entry);
  return PrefixPin(state_, entry);
}

void PrefixStore::SetBudget(size_t budget_bytes) {
  RetiredPayloads retired;
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->budget = budget_bytes;
  state_->EvictUntilFits(0, retired);
}

size_t PrefixStore::EvictDownTo(size_t bytes) {
  RetiredPayloads retired;
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->EvictDownTo(bytes, retired);
  return state_->bytes_used;
}

PrefixStoreStats PrefixStore::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const PrefixStoreState& s = *state_;
  PrefixStoreStats out;
  out.queries = s.queries;
  out.hits = s.hits;
  out.misses = s.misses;
  out.inserts = s.inserts;
  out.evictions = s.evictions;
  out.entries = s.entries.size();
  out.bytes_used = s.bytes_used;
  out.bytes_pinned = s.bytes_pinned;
  out.budget = s.budget;
  return out;
}

void PrefixStore::VerifyInvariants() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  const PrefixStoreState& s = *state_;
  auto fail = [](const std::string& what) {
    throw Error(ErrorKind::kInternal, "prefix store invariant broken: " + what);
  };
  s.tree.VerifyInvariants();
  if (s.tree.value_count() != s.entries.size()) fail("tree values != entries");
  if (s.lru.size() != s.entries.size()) fail("LRU list size != entries");
  size_t used = 0, pinned = 0;
  bool all_pinned = true;
  for (const PrefixEntry* entry : s.lru) {
    auto it = s.entries.find(entry->id);
    if (it == s.entries.end() || it->second.get() != entry) fail("LRU names a lost entry");
    if (s.tree.Find(entry->tokens.view()) != entry->id) fail("entry tokens do not lead to it");
    used += entry->bytes;
    if (entry->pins > 0) pinned += entry->bytes;
    all_pinned = all_pinned && entry->pins > 0;
  }
  if (used != s.bytes_used) fail("bytes_used");
  if (pinned != s.bytes_pinned) fail("bytes_pinned");
  if (s.bytes_used > s.budget && !all_pinned) fail("over budget with unpinned entries");
  if (s.hits + s.misses != s.queries) fail("hits + misses != queries");
}

}  // namespace bicache::cache
