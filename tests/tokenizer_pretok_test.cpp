// Pre-tokenizer splits for each named regex. Expected pieces were worked out by hand from the
// pattern definitions (alternatives tried left to right at each position, greedy with
// backtracking); the comments give the deciding alternative. The bailingmoe pieces come from
// Python's `regex` module instead (tests/data/pretok_bailingmoe.json, written by
// tools/reference/make_pretok_golden.py from llama.cpp's pattern).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/pretokenizer.h"
#include "util/error.h"

namespace bicache::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

Pieces Split(const char* pre, std::string_view text) {
  PreTokenizer p(pre);
  Pieces out;
  std::string joined;
  for (std::string_view s : p.Split(text)) {
    out.emplace_back(s);
    joined += s;
  }
  EXPECT_EQ(joined, text) << "pieces must cover the input exactly";
  return out;
}

TEST(PreTokenizer, NamesAndAliases) {
  EXPECT_EQ(PreTokenizer("default").kind(), "gpt2");
  EXPECT_EQ(PreTokenizer("gpt2").kind(), "gpt2");
  EXPECT_EQ(PreTokenizer("llama-bpe").kind(), "llama3");
  EXPECT_EQ(PreTokenizer("llama3").kind(), "llama3");
  EXPECT_EQ(PreTokenizer("llada").kind(), "llama3");
  EXPECT_EQ(PreTokenizer("qwen2").kind(), "qwen2");
  EXPECT_EQ(PreTokenizer("gpt2-digits").kind(), "gpt2-digits");
  EXPECT_FALSE(PreTokenizer("gpt2-digits").ignore_merges());
  EXPECT_TRUE(PreTokenizer("llama-bpe").ignore_merges());
  EXPECT_FALSE(PreTokenizer("qwen2").ignore_merges());
  // llama.cpp gives all three names LLAMA_VOCAB_PRE_TYPE_BAILINGMOE, without ignore_merges.
  for (const char* pre : {"bailingmoe", "bailingmoe2", "llada-moe"}) {
    EXPECT_EQ(PreTokenizer(pre).kind(), "bailingmoe") << pre;
    EXPECT_FALSE(PreTokenizer(pre).ignore_merges()) << pre;
  }
  for (const char* unknown : {"deepseek-llm", "bailingmoe3", "BailingMoe2"}) {
    try {
      PreTokenizer p(unknown);
      ADD_FAILURE() << "unknown pre-tokenizer accepted: " << unknown;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("'") + unknown + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("bailingmoe2"), std::string::npos) << "supported names listed: " << msg;
    }
  }
}

TEST(PreTokenizer, Gpt2) {
  // Contractions are lowercase only; a space joins the following word/number/punctuation; of a
  // whitespace run before a word, all but the last char form \s+(?!\S).
  EXPECT_EQ(Split("gpt2", "Hello world's 123 foo!!  bar\n\n baz"),
            (Pieces{"Hello", " world", "'s", " 123", " foo", "!!", " ", " bar", "\n\n", " baz"}));
  // "'VE" is not a (case-sensitive) contraction: "'" is punctuation, "VE" letters; numbers stay
  // whole; ",\n\n " : "," then whitespace "\n\n " (up to the space before "ok").
  EXPECT_EQ(Split("gpt2", "I'VE 12345 apples,\n\n  ok  \n"),
            (Pieces{"I", "'", "VE", " 12345", " apples", ",", "\n\n ", " ok", "  \n"}));
  // Whitespace before a newline: " " (followed by \n, a space) then "\n" (followed by 'b').
  EXPECT_EQ(Split("gpt2", "a \nb"), (Pieces{"a", " ", "\n", "b"}));
  // \p{L} is Unicode-aware (UCP); "$" is not a letter so it stands alone.
  EXPECT_EQ(Split("gpt2", "$hello 日本語 café"), (Pieces{"$", "hello", " 日本語", " café"}));
}

TEST(PreTokenizer, Gpt2Digits) {
  // As GPT-2 but one digit per piece; a space before a number stays on its first digit, and
  // digits after letters or punctuation start a piece of their own.
  EXPECT_EQ(Split("gpt2-digits", "63 - 4 = 59. #### 105"),
            (Pieces{"6", "3", " -", " 4", " =", " 5", "9", ".", " ####", " 1", "0", "5"}));
  EXPECT_EQ(Split("gpt2-digits", "x12 3.14"), (Pieces{"x", "1", "2", " 3", ".", "1", "4"}));
  // Everything without digits splits exactly as GPT-2 does.
  for (const char* text : {"Hello world's foo!!  bar\n\n baz", "I'VE apples,\n\n  ok  \n",
                           "$hello 日本語 café", "input: k m v -> output: m v k"}) {
    EXPECT_EQ(Split("gpt2-digits", text), Split("gpt2", text)) << text;
  }
}

TEST(PreTokenizer, Llama3) {
  // Case-insensitive contractions; digits in groups of at most three; punctuation takes the
  // newlines after it; " " before a digit is a lone whitespace piece.
  EXPECT_EQ(Split("llama-bpe", "I'VE 12345 apples,\n\n  ok  \n"),
            (Pieces{"I", "'VE", " ", "123", "45", " apples", ",\n\n", " ", " ok", "  \n"}));
  EXPECT_EQ(
      Split("llama3", "Hello world's 123 foo!!  bar\n\n baz"),
      (Pieces{"Hello", " world", "'s", " ", "123", " foo", "!!", " ", " bar", "\n\n", " baz"}));
  // \s*[\r\n]+ keeps spaces together with the newline that follows them.
  EXPECT_EQ(Split("llama3", "a \nb"), (Pieces{"a", " \n", "b"}));
  EXPECT_EQ(Split("llama3", "x  \n\n  y"), (Pieces{"x", "  \n\n", " ", " y"}));
  // One leading non-letter, non-digit, non-newline char joins a letter run.
  EXPECT_EQ(Split("llama3", "$hello 日本語 café"), (Pieces{"$hello", " 日本語", " café"}));
  EXPECT_EQ(Split("llama3", "1234567"), (Pieces{"123", "456", "7"}));
}

TEST(PreTokenizer, Qwen2) {
  // As LLaMA-3, but every digit is its own piece.
  EXPECT_EQ(
      Split("qwen2", "I'VE 12345 apples,\n\n  ok  \n"),
      (Pieces{"I", "'VE", " ", "1", "2", "3", "4", "5", " apples", ",\n\n", " ", " ok", "  \n"}));
  EXPECT_EQ(Split("qwen2", "a \nb"), (Pieces{"a", " \n", "b"}));
  EXPECT_EQ(Split("qwen2", "$hello 日本語 café"), (Pieces{"$hello", " 日本語", " café"}));
  EXPECT_EQ(Split("qwen2", "we'll"), (Pieces{"we", "'ll"}));
}

// Every case of the fixture, under each name it lists: the engine's pattern is the fixture's (the
// one read from llama.cpp) and PCRE2 splits each text into the pieces Python's `regex` gave.
TEST(PreTokenizer, BailingMoeMatchesPythonRegex) {
  std::ifstream f(testing::DataPath("pretok_bailingmoe.json"));
  ASSERT_TRUE(f) << "tests/data/pretok_bailingmoe.json";
  const nlohmann::json doc = nlohmann::json::parse(f);
  const auto pres = doc.at("pre").get<std::vector<std::string>>();
  ASSERT_EQ(pres, (Pieces{"bailingmoe", "bailingmoe2", "llada-moe"}));
  ASSERT_GE(doc.at("cases").size(), 8u);
  for (const std::string& pre : pres) {
    EXPECT_EQ(PreTokenizer(pre).pattern(), doc.at("pattern").get<std::string>()) << pre;
    for (const auto& c : doc.at("cases")) {
      const std::string text = c.at("text").get<std::string>();
      EXPECT_EQ(Split(pre.c_str(), text), c.at("pieces").get<Pieces>())
          << pre << ": " << c.at("what").get<std::string>();
    }
  }
  // The generator found qwen2's pattern splitting the same except where its (?i) folds U+017F.
  for (const auto& c : doc.at("cases")) {
    const std::string text = c.at("text").get<std::string>();
    const bool same = Split("qwen2", text) == c.at("pieces").get<Pieces>();
    EXPECT_EQ(same, !c.at("case_fold_differs").get<bool>()) << text;
  }
}

TEST(PreTokenizer, BailingMoe) {
  // Spelled out (Python's regex gives the same pieces): one digit per piece; a whitespace run up to
  // its last newline is one piece; contractions in any case; the long s is not a contraction.
  EXPECT_EQ(Split("bailingmoe2", "x 12\n \n  y"), (Pieces{"x", " ", "1", "2", "\n \n", " ", " y"}));
  EXPECT_EQ(Split("bailingmoe2", "WE'LL it'ſt"), (Pieces{"WE", "'LL", " it", "'ſt"}));
  EXPECT_EQ(Split("qwen2", "it'ſt"), (Pieces{"it", "'ſ", "t"}));
}

TEST(PreTokenizer, InvalidUtf8BytesBecomeTheirOwnPieces) {
  for (const char* pre : {"gpt2", "gpt2-digits", "llama3", "qwen2", "bailingmoe2"}) {
    EXPECT_EQ(Split(pre,
                    "ab\xFF"
                    "cd"),
              (Pieces{"ab", "\xFF", "cd"}))
        << pre;
    EXPECT_EQ(Split(pre, "\xC3"), (Pieces{"\xC3"})) << pre;
  }
}

TEST(PreTokenizer, EmptyInput) {
  EXPECT_TRUE(Split("gpt2", "").empty());
}

}  // namespace
}  // namespace bicache::tokenizer
