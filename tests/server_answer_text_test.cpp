// server::AnswerText: the committed tokens of one answer as text, cut before the first stop
// string. The stream sends only Sendable(), so what is checked here is what a client can see: no
// text past a stop ever becomes sendable (also when the stop arrives split over several steps),
// the cut does not depend on how the tokens were grouped into steps, and the token count the usage
// reports. Tokens come from the golden tiny LLaDA tokenizer (byte-level BPE, vocabulary 300).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "server/answer_text.h"
#include "test_util.h"

namespace bicache::server {
namespace {

using bicache::testing::DataPath;

class AnswerTextTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lm_ = engine::LoadedModel::Load(DataPath("golden/llada-tiny.gguf"));
  }
  static void TearDownTestSuite() { lm_.reset(); }

  static const tokenizer::Tokenizer& Tok() { return lm_->tokenizer(); }
  // One token per byte (the vocabulary's single-byte tokens), so any split of the text is a step
  // boundary somewhere, also inside a character.
  static std::vector<int32_t> ByteTokens(const std::string& text) {
    std::vector<int32_t> by_byte(256, -1);
    for (int32_t id = 0; id < Tok().n_vocab(); ++id) {
      const std::string& b = Tok().TokenBytes(id, /*skip_special=*/true);
      if (b.size() == 1 && by_byte[static_cast<unsigned char>(b[0])] < 0)
        by_byte[static_cast<unsigned char>(b[0])] = id;
    }
    std::vector<int32_t> ids;
    for (char c : text) {
      const int32_t id = by_byte[static_cast<unsigned char>(c)];
      EXPECT_GE(id, 0) << "no token for byte " << int(static_cast<unsigned char>(c));
      ids.push_back(id);
    }
    return ids;
  }

  // Feeds `ids` in steps of `step` tokens; checks after each step that what is sendable only grew
  // and is a prefix of `want`; returns the final text.
  static std::string Feed(const std::vector<int32_t>& ids, size_t step,
                          const std::vector<std::string>& stops, const std::string& want) {
    AnswerText a(Tok(), stops);
    std::string seen;
    for (size_t i = 0; i < ids.size(); i += step) {
      const size_t n = std::min(step, ids.size() - i);
      a.Append(std::span<const int32_t>(ids).subspan(i, n));
      const std::string now(a.Sendable());
      EXPECT_EQ(now.compare(0, seen.size(), seen), 0) << "sendable shrank at token " << i;
      EXPECT_EQ(want.compare(0, now.size(), now), 0)
          << "sendable '" << now << "' is not a prefix of '" << want << "' (step " << step << ")";
      seen = now;
    }
    a.Finish();
    EXPECT_EQ(std::string(a.Sendable()), std::string(a.text()));
    return std::string(a.text());
  }

  static std::unique_ptr<engine::LoadedModel> lm_;
};

std::unique_ptr<engine::LoadedModel> AnswerTextTest::lm_;

TEST_F(AnswerTextTest, NoStopsIsTheDetokenizedAnswer) {
  const std::vector<int32_t> ids = Tok().Encode("Hello there, world.\nBye", false);
  AnswerText a(Tok(), {});
  a.Append(ids);
  EXPECT_EQ(a.Sendable(), lm_->Detokenize(ids));  // nothing to hold back
  a.Finish();
  EXPECT_FALSE(a.stopped());
  EXPECT_EQ(a.text(), lm_->Detokenize(ids));
  EXPECT_EQ(a.tokens_used(), ids.size());
}

TEST_F(AnswerTextTest, AnEmptyStopStringIsIgnored) {
  // The parser refuses "" (it would match everywhere); AnswerText drops one given anyway.
  AnswerText a(Tok(), {"", "z"});
  a.Append(ByteTokens("abc"));
  EXPECT_FALSE(a.stopped());
  EXPECT_EQ(a.Sendable(), "abc");
}

TEST_F(AnswerTextTest, CutsBeforeTheStopWhateverTheStepSize) {
  const std::string text = "one\ntwo\n\nthree\n\nfour";
  const std::vector<int32_t> ids = ByteTokens(text);
  for (size_t step = 1; step <= ids.size(); ++step) {
    EXPECT_EQ(Feed(ids, step, {"\n\n"}, "one\ntwo"), "one\ntwo") << "step " << step;
  }
}

TEST_F(AnswerTextTest, AStopSplitAcrossStepsIsHeldBackUntilItCompletes) {
  AnswerText a(Tok(), {"END"});
  a.Append(ByteTokens("abc E"));
  EXPECT_EQ(a.Sendable(), "abc ");  // "E" may start "END"
  a.Append(ByteTokens("N"));
  EXPECT_EQ(a.Sendable(), "abc ");  // "EN" too
  a.Append(ByteTokens("x"));
  EXPECT_EQ(a.Sendable(), "abc ENx");  // "ENx" cannot: released
  a.Append(ByteTokens(" EN"));
  EXPECT_EQ(a.Sendable(), "abc ENx ");
  a.Append(ByteTokens("D and more"));
  EXPECT_TRUE(a.stopped());
  EXPECT_EQ(a.Sendable(), "abc ENx ");
  EXPECT_EQ(a.text(), "abc ENx ");
  // The tokens up to the one that completed the stop: "abc ENx END" is 11 byte tokens.
  EXPECT_EQ(a.tokens_used(), 11u);
  EXPECT_EQ(a.tokens(), 20u);
  a.Append(ByteTokens("ignored"));  // after the stop nothing is read
  EXPECT_EQ(a.tokens(), 20u);
}

TEST_F(AnswerTextTest, AHeldTailIsReleasedAtTheEnd) {
  AnswerText a(Tok(), {"\n\n"});
  a.Append(ByteTokens("last line\n"));
  EXPECT_EQ(a.Sendable(), "last line");
  a.Finish();
  EXPECT_FALSE(a.stopped());
  EXPECT_EQ(a.Sendable(), "last line\n");
}

TEST_F(AnswerTextTest, TheStopThatEndsFirstWins) {
  // "bcd" ends before "abcde" and before the later "x"; the same for every grouping of the bytes.
  const std::vector<int32_t> ids = ByteTokens("zabcdex");
  for (size_t step = 1; step <= ids.size(); ++step) {
    EXPECT_EQ(Feed(ids, step, {"abcde", "x", "bcd"}, "za"), "za") << "step " << step;
  }
  // On a tie of ends, the one that starts first: "abc" over "bc".
  for (size_t step = 1; step <= 4; ++step) {
    EXPECT_EQ(Feed(ByteTokens("zabc"), step, {"bc", "abc"}, "z"), "z") << "step " << step;
  }
}

TEST_F(AnswerTextTest, AStopAtTheVeryStartLeavesAnEmptyAnswer) {
  AnswerText a(Tok(), {"Q"});
  a.Append(ByteTokens("Q: next"));
  EXPECT_TRUE(a.stopped());
  EXPECT_EQ(a.text(), "");
  EXPECT_EQ(a.tokens_used(), 1u);
}

TEST_F(AnswerTextTest, MultiByteCharactersAndStops) {
  // "é" is two bytes, fed one byte token at a time: the decoder holds the first back, and a stop
  // made of a multi-byte character matches only whole.
  const std::string text = "caf\xC3\xA9 \xE2\x86\x92 done";  // "café → done"
  const std::vector<int32_t> ids = ByteTokens(text);
  for (size_t step = 1; step <= ids.size(); ++step) {
    EXPECT_EQ(Feed(ids, step, {"\xE2\x86\x92"}, "caf\xC3\xA9 "), "caf\xC3\xA9 ") << step;
  }
  AnswerText a(Tok(), {"\xC3\xA9"});
  a.Append(ByteTokens("caf\xC3"));
  EXPECT_EQ(a.Sendable(), "caf");  // half a character is never sendable
  a.Append(ByteTokens("\xA9!"));
  EXPECT_TRUE(a.stopped());
  EXPECT_EQ(a.text(), "caf");
}

TEST_F(AnswerTextTest, AStopInTheDecodersLastBytesIsFoundAtFinish) {
  // An unfinished character at the end becomes U+FFFD at Finish, and that is searched too.
  AnswerText a(Tok(), {"\xEF\xBF\xBD"});
  a.Append(ByteTokens("ok\xE2\x86"));
  EXPECT_EQ(a.Sendable(), "ok");
  a.Finish();
  EXPECT_TRUE(a.stopped());
  EXPECT_EQ(a.text(), "ok");
  EXPECT_EQ(a.tokens_used(), 4u);
}

}  // namespace
}  // namespace bicache::server
