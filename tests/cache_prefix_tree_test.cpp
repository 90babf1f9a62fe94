#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cache/prefix_tree.h"
#include "util/error.h"

namespace bicache::cache {
namespace {

SharedTokens Tokens(std::vector<int32_t> tokens) {
  const size_t n = tokens.size();
  return SharedTokens{std::make_shared<const std::vector<int32_t>>(std::move(tokens)), n};
}

TEST(PrefixTree, SplitsEdgesAndMergesThemBack) {
  PrefixTree tree;
  tree.Insert(Tokens({1, 2, 3, 4}), 10);
  EXPECT_EQ(tree.node_count(), 2u);
  // Diverges inside the edge [1 2 3 4]: a value-less branch node at [1 2].
  tree.Insert(Tokens({1, 2, 5, 6}), 20);
  EXPECT_EQ(tree.node_count(), 4u);
  tree.VerifyInvariants();
  EXPECT_FALSE(tree.Find(std::vector<int32_t>{1, 2}).has_value());
  // Ends inside nothing new: the branch node itself gets a value.
  tree.Insert(Tokens({1, 2}), 30);
  EXPECT_EQ(tree.node_count(), 4u);
  EXPECT_EQ(tree.Find(std::vector<int32_t>{1, 2}), 30u);

  tree.Erase(std::vector<int32_t>{1, 2, 5, 6});
  EXPECT_EQ(tree.node_count(), 3u);  // [1 2] keeps its value, so no merge
  tree.Erase(std::vector<int32_t>{1, 2});
  EXPECT_EQ(tree.node_count(), 2u);  // [1 2] merged into its only child [3 4]
  tree.VerifyInvariants();
  EXPECT_EQ(tree.Find(std::vector<int32_t>{1, 2, 3, 4}), 10u);
  tree.Erase(std::vector<int32_t>{1, 2, 3, 4});
  EXPECT_EQ(tree.node_count(), 1u);
  EXPECT_EQ(tree.value_count(), 0u);
  tree.VerifyInvariants();
}

TEST(PrefixTree, InsertEndingMidEdgeSharesTheExistingBuffer) {
  PrefixTree tree;
  const SharedTokens long_path = Tokens({7, 8, 9, 10});
  tree.Insert(long_path, 1);
  const SharedTokens stored = tree.Insert(Tokens({7, 8}), 2);
  EXPECT_EQ(stored.buffer, long_path.buffer);  // no copy: a view of the longer path's tokens
  EXPECT_EQ(stored.length, 2u);
  tree.VerifyInvariants();
}

TEST(PrefixTree, LongestMatchWalksOnlyWholeVerifiedEdges) {
  PrefixTree tree;
  tree.Insert(Tokens({1, 2, 3}), 1);
  tree.Insert(Tokens({1, 2, 3, 4, 5, 6}), 2);
  const std::vector<int32_t> query = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(tree.LongestMatch(query, 100)->value, 2u);
  EXPECT_EQ(tree.LongestMatch(query, 5)->value, 1u);  // [1..6] is longer than max_len
  EXPECT_FALSE(tree.LongestMatch(query, 2).has_value());
  EXPECT_EQ(tree.LongestMatch(std::vector<int32_t>{1, 2, 3, 4, 9}, 100)->length, 3u);
  EXPECT_FALSE(tree.LongestMatch(std::vector<int32_t>{1, 2}, 100).has_value());
  EXPECT_FALSE(tree.LongestMatch(std::vector<int32_t>{}, 100).has_value());
}

TEST(PrefixTree, RejectsDuplicateAndEmptyInsertAndMissingErase) {
  PrefixTree tree;
  tree.Insert(Tokens({1, 2}), 1);
  EXPECT_THROW(tree.Insert(Tokens({1, 2}), 2), Error);
  EXPECT_THROW(tree.Insert(Tokens({}), 3), Error);
  EXPECT_THROW(tree.Erase(std::vector<int32_t>{1}), Error);
  EXPECT_THROW(tree.Erase(std::vector<int32_t>{1, 2, 3}), Error);
  tree.VerifyInvariants();
}

}  // namespace
}  // namespace bicache::cache
