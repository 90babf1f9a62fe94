#include "cache/prefix_tree.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "util/error.h"

namespace bicache::cache {

struct PrefixTree::Node {
  std::shared_ptr<const std::vector<int32_t>> path;  // (*path)[0, depth) = tokens root -> this node
  size_t depth = 0;
  Node* parent = nullptr;
  std::optional<Value> value;
  std::unordered_map<int32_t, std::unique_ptr<Node>> children;  // keyed by first edge token

  std::span<const int32_t> edge() const {
    const size_t begin = parent ? parent->depth : 0;
    return std::span<const int32_t>(path->data() + begin, depth - begin);
  }
  Node* child(int32_t first_token) const {
    auto it = children.find(first_token);
    return it == children.end() ? nullptr : it->second.get();
  }
};

namespace {

// Length of the common prefix of `a` and `b`.
size_t CommonLength(std::span<const int32_t> a, std::span<const int32_t> b) {
  const size_t n = std::min(a.size(), b.size());
  return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + n, b.begin()).first - a.begin());
}

}  // namespace

PrefixTree::PrefixTree() : root_(std::make_unique<Node>()) {
  root_->path = std::make_shared<const std::vector<int32_t>>();
}

PrefixTree::~PrefixTree() = default;

std::optional<PrefixTree::Match> PrefixTree::LongestMatch(std::span<const int32_t> tokens,
                                                          size_t max_len) const {
  const size_t limit = std::min(tokens.size(), max_len);
  std::optional<Match> best;
  const Node* node = root_.get();
  while (true) {
    if (node->value) best = Match{*node->value, node->depth};
    if (node->depth == limit) break;
    const Node* next = node->child(tokens[node->depth]);
    // A path that ends (or is cut by max_len) inside an edge reaches no further value.
    if (!next || next->depth > limit) break;
    const std::span<const int32_t> edge = next->edge();
    if (!std::equal(edge.begin(), edge.end(), tokens.begin() + node->depth)) break;
    node = next;
  }
  return best;
}

PrefixTree::Node* PrefixTree::FindNode(std::span<const int32_t> prefix) const {
  Node* node = root_.get();
  while (node->depth < prefix.size()) {
    Node* next = node->child(prefix[node->depth]);
    if (!next || next->depth > prefix.size()) return nullptr;
    const std::span<const int32_t> edge = next->edge();
    if (!std::equal(edge.begin(), edge.end(), prefix.begin() + node->depth)) return nullptr;
    node = next;
  }
  return node;
}

std::optional<PrefixTree::Value> PrefixTree::Find(std::span<const int32_t> prefix) const {
  const Node* node = FindNode(prefix);
  return node ? node->value : std::nullopt;
}

SharedTokens PrefixTree::Insert(const SharedTokens& prefix, Value value) {
  const std::span<const int32_t> tokens = prefix.view();
  if (tokens.empty())
    throw Error(ErrorKind::kInternal, "prefix tree: cannot insert an empty prefix");
  Node* node = root_.get();
  while (node->depth < tokens.size()) {
    const size_t pos = node->depth;
    auto it = node->children.find(tokens[pos]);
    if (it == node->children.end()) {
      auto leaf = std::make_unique<Node>();
      leaf->path = prefix.buffer;
      leaf->depth = tokens.size();
      leaf->parent = node;
      Node* raw = leaf.get();
      node->children.emplace(tokens[pos], std::move(leaf));
      ++node_count_;
      node = raw;
      break;
    }
    Node* next = it->second.get();
    const std::span<const int32_t> edge = next->edge();
    const size_t common = CommonLength(edge, tokens.subspan(pos));
    if (common == edge.size()) {
      node = next;
      continue;
    }
    // The path ends or diverges inside `next`'s edge: put a node at the split point. It shares
    // `next`'s buffer, whose first pos + common tokens are exactly the split node's path.
    auto split = std::make_unique<Node>();
    split->path = next->path;
    split->depth = pos + common;
    split->parent = node;
    std::unique_ptr<Node> moved = std::move(it->second);
    moved->parent = split.get();
    split->children.emplace(edge[common], std::move(moved));
    Node* raw = split.get();
    it->second = std::move(split);
    ++node_count_;
    node = raw;
  }
  if (node->value) {
    throw Error(ErrorKind::kInternal, "prefix tree: a value is already stored at this " +
                                          std::to_string(tokens.size()) + "-token prefix");
  }
  node->value = value;
  ++value_count_;
  return SharedTokens{node->path, node->depth};
}

void PrefixTree::Erase(std::span<const int32_t> prefix) {
  Node* node = FindNode(prefix);
  if (!node || !node->value || node == root_.get()) {
    throw Error(ErrorKind::kInternal, "prefix tree: no value stored at this " +
                                          std::to_string(prefix.size()) + "-token prefix");
  }
  node->value.reset();
  --value_count_;
  while (node != root_.get() && !node->value) {
    Node* parent = node->parent;
    const int32_t key = (*node->path)[parent->depth];
    if (node->children.empty()) {
      parent->children.erase(key);  // destroys `node`
      --node_count_;
      node = parent;
      continue;
    }
    if (node->children.size() == 1) {
      // Merge: the only child takes over the node's slot; its buffer already holds the whole path.
      std::unique_ptr<Node> only = std::move(node->children.begin()->second);
      only->parent = parent;
      parent->children[key] = std::move(only);  // destroys `node`
      --node_count_;
    }
    break;
  }
}

void PrefixTree::VerifyInvariants() const {
  auto fail = [](const std::string& what) {
    throw Error(ErrorKind::kInternal, "prefix tree invariant broken: " + what);
  };
  size_t nodes = 0, values = 0;
  std::vector<const Node*> stack = {root_.get()};
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    ++nodes;
    if (node->value) ++values;
    if (node->path->size() < node->depth) fail("path buffer shorter than node depth");
    if (node != root_.get()) {
      const Node* parent = node->parent;
      if (node->depth <= parent->depth) fail("empty edge");
      if (!node->value && node->children.size() < 2) fail("value-less node with < 2 children");
      if (!std::equal(parent->path->begin(), parent->path->begin() + parent->depth,
                      node->path->begin())) {
        fail("child path does not extend its parent's path");
      }
    } else if (node->value) {
      fail("root holds a value");
    }
    for (const auto& [key, child] : node->children) {
      if (child->parent != node) fail("wrong parent pointer");
      if (child->depth <= node->depth || child->path->size() < child->depth ||
          (*child->path)[node->depth] != key) {
        fail("wrong child key");
      }
      stack.push_back(child.get());
    }
  }
  if (nodes != node_count_) fail("node count");
  if (values != value_count_) fail("value count");
}

}  // namespace bicache::cache
