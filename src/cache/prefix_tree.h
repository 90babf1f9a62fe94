// A radix (compressed) tree over token ids: pure bookkeeping, no payloads, not thread-safe.
//
// Each node stands for the token path from the root to it; an edge holds a run of tokens. A node
// may carry a value (the store's entry id), meaning "this exact token path is cached". Lookups walk
// the tree comparing token ids, so a match is always verified token by token, never by a hash.
//
// Token storage: no edge owns a copy of its tokens. Every node points at an immutable buffer whose
// first `depth` tokens are the node's full path; its edge is buffer[parent.depth, depth). Splitting
// an edge (a prefix ending, or diverging, mid-edge) creates a node that shares the split node's
// buffer, and merging a single-child chain back only re-parents the child, so neither copies a
// token. The cost: a buffer stays alive while any node points at it, i.e. a few token lists beyond
// the live entries; negligible next to the payloads.
//
// Shape invariant (checked by VerifyInvariants): every non-root node without a value has at least
// two children. Erase restores it by pruning childless nodes and merging single-child ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace bicache::cache {

// The first `length` tokens of a shared immutable buffer.
struct SharedTokens {
  std::shared_ptr<const std::vector<int32_t>> buffer;
  size_t length = 0;

  std::span<const int32_t> view() const {
    return buffer ? std::span<const int32_t>(buffer->data(), length) : std::span<const int32_t>();
  }
};

class PrefixTree {
 public:
  using Value = uint64_t;
  struct Match {
    Value value;
    size_t length;  // tokens of the matched path
  };

  PrefixTree();
  ~PrefixTree();
  PrefixTree(const PrefixTree&) = delete;
  PrefixTree& operator=(const PrefixTree&) = delete;

  // The deepest node with a value whose path is a prefix of `tokens` and at most `max_len` long.
  std::optional<Match> LongestMatch(std::span<const int32_t> tokens, size_t max_len) const;
  // The value stored at exactly `prefix`.
  std::optional<Value> Find(std::span<const int32_t> prefix) const;
  // Stores `value` at `prefix` (non-empty, no value there yet: Error(kInternal) otherwise),
  // splitting an edge if the path ends or diverges inside one. Returns the node's path tokens: a
  // view that may share a buffer already in the tree rather than `prefix.buffer`.
  SharedTokens Insert(const SharedTokens& prefix, Value value);
  // Removes the value at exactly `prefix` (Error(kInternal) if there is none), then prunes nodes
  // left without value and children and merges value-less single-child nodes into their child.
  void Erase(std::span<const int32_t> prefix);

  size_t node_count() const { return node_count_; }  // including the root
  size_t value_count() const { return value_count_; }
  // Walks the whole tree; throws Error(kInternal) naming the first broken invariant. For tests.
  void VerifyInvariants() const;

 private:
  struct Node;
  // The node at exactly `prefix`, or null.
  Node* FindNode(std::span<const int32_t> prefix) const;

  std::unique_ptr<Node> root_;
  size_t node_count_ = 1;
  size_t value_count_ = 0;
};

}  // namespace bicache::cache
