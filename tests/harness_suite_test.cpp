// harness::IsCorrect, the score `bicache eval` and `bicache bench` report: exact match for plain
// answers, the integer after "####" for arith, the text after "####" for worked answers.
#include <gtest/gtest.h>

#include <string>

#include "harness/suite.h"

namespace bicache::harness {
namespace {

SuiteSample Sample(const std::string& family, const std::string& answer) {
  SuiteSample s;
  s.family = family;
  s.answer = answer;
  return s;
}

TEST(SuiteScore, PlainAnswersAreExactMatchesAfterTrimming) {
  EXPECT_TRUE(IsCorrect(Sample("docqa", "frog"), "  frog \n"));
  EXPECT_FALSE(IsCorrect(Sample("docqa", "frog"), "frogs"));
  EXPECT_TRUE(IsCorrect(Sample("rule", "b c a"), "b c a"));
  EXPECT_FALSE(IsCorrect(Sample("rule", "b c a"), "b a c"));
  EXPECT_FALSE(IsCorrect(Sample("rule", "b c a"), ""));
}

TEST(SuiteScore, ArithComparesTheIntegerAfterTheLastMarker) {
  const SuiteSample s = Sample("arith", "7 * 9 = 63. 63 + 13 = 76. #### 76");
  EXPECT_TRUE(IsCorrect(s, "7 * 9 = 63. 63 + 13 = 77. #### 76"));  // the steps are not scored
  EXPECT_TRUE(IsCorrect(s, "#### 12 #### 76 apples"));
  EXPECT_FALSE(IsCorrect(s, "7 * 9 = 63. 63 + 13 = 76."));  // no marker, no number
  EXPECT_FALSE(IsCorrect(s, "#### 760"));
  EXPECT_FALSE(IsCorrect(Sample("arith", "no number"), "no number"));  // an unscorable reference
}

TEST(SuiteScore, WorkedAnswersCompareTheTextAfterTheLastMarker) {
  const SuiteSample s = Sample("rule", "rule T. #### b c a");
  EXPECT_TRUE(IsCorrect(s, "rule T. #### b c a"));
  EXPECT_TRUE(IsCorrect(s, "rule P. ####  b c a "));  // the named rule is not scored
  EXPECT_FALSE(IsCorrect(s, "rule T. #### b a c"));
  EXPECT_FALSE(IsCorrect(s, "rule T. #### b c a d"));
  EXPECT_FALSE(IsCorrect(s, "b c a"));  // the marker is part of the format
  EXPECT_FALSE(IsCorrect(s, "rule T."));
}

}  // namespace
}  // namespace bicache::harness
