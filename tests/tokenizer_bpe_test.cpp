// Byte-level BPE tokenizer: vocabulary validation, encoding (merge order, specials, UTF-8,
// invalid bytes), decoding and streaming. Expected ids are derived by hand from the merge ranks
// of the small vocabulary built below.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/byte_unicode.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace bicache::tokenizer {
namespace {

using bicache::testing::ExpectError;

// Byte-level text of raw bytes (space -> U+0120 'Ġ', etc.).
std::string V(std::string_view raw) {
  return BytesToVocabText(raw);
}

// Vocabulary: ids 0..255 are the byte tokens (id == byte value), then merge results, then a few
// extra tokens, then specials. Merge ranks deliberately disagree with left-to-right order:
// "b c" (rank 0) beats "a b" (rank 1).
struct TestVocab {
  TokenizerData data;
  int32_t Id(std::string_view vocab_text) const {
    for (size_t i = 0; i < data.tokens.size(); ++i) {
      if (data.tokens[i] == vocab_text) return static_cast<int32_t>(i);
    }
    ADD_FAILURE() << "no token " << vocab_text;
    return -1;
  }
};

TestVocab MakeVocab(std::string pre = "gpt2") {
  TestVocab v;
  TokenizerData& d = v.data;
  for (int b = 0; b < 256; ++b) d.tokens.push_back(V(std::string(1, static_cast<char>(b))));
  d.token_type.assign(256, 1);
  auto merge = [&](std::string_view l, std::string_view r) {
    d.merges.push_back(V(l) + " " + V(r));
    d.tokens.push_back(V(l) + V(r));
    d.token_type.push_back(1);
  };
  merge("b", "c");               // 0
  merge("a", "b");               // 1
  merge(" ", "a");               // 2
  merge(" a", "bc");             // 3
  merge("h", "e");               // 4
  merge("l", "l");               // 5
  merge("he", "ll");             // 6
  merge("hell", "o");            // 7
  merge("\xC3", "\xA9");         // 8: "é"
  merge("a", "a");               // 9
  d.tokens.push_back(V("abc"));  // reachable only by whole-piece lookup (llama3 ignore_merges)
  d.token_type.push_back(1);
  for (const char* s : {"<|bos|>", "<|eot|>", "<|a|>"}) {
    d.tokens.push_back(s);
    d.token_type.push_back(3);  // control
  }
  d.tokens.push_back("<|a|>b");
  d.token_type.push_back(4);  // user-defined, longer than "<|a|>"
  d.pre = std::move(pre);
  d.bos = v.Id("<|bos|>");
  d.eot = v.Id("<|eot|>");
  return v;
}

std::vector<int32_t> Bytes(std::string_view s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(ByteUnicode, Gpt2Table) {
  EXPECT_EQ(ByteToCodepoint('A'), uint32_t('A'));
  EXPECT_EQ(ByteToCodepoint(' '), 0x120u);  // first remapped run: 0x00..0x20 -> U+0100..
  EXPECT_EQ(ByteToCodepoint(0x00), 0x100u);
  EXPECT_EQ(ByteToCodepoint('\n'), 0x10Au);
  EXPECT_EQ(ByteToCodepoint(0x7F), 0x121u);  // next non-printable after the space
  EXPECT_EQ(ByteToCodepoint(0xAD), 0x143u);  // soft hyphen is the last remapped byte
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ByteFromCodepoint(ByteToCodepoint(b)), b);
  EXPECT_EQ(ByteFromCodepoint(0x144), -1);
}

TEST(Tokenizer, MergeRankOrderNotLeftToRight) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  // (b,c) has rank 0 < rank 1 of (a,b): "abc" -> a + bc, not ab + c.
  EXPECT_EQ(tok.Encode("abc"), (std::vector<int32_t>{'a', v.Id(V("bc"))}));
  // " abc": bc first, then " a" (rank 2), then " a"+"bc" (rank 3).
  EXPECT_EQ(tok.Encode(" abc"), (std::vector<int32_t>{v.Id(V(" abc"))}));
  // Chained merges.
  EXPECT_EQ(tok.Encode("hello"), (std::vector<int32_t>{v.Id("hello")}));
  // Equal ranks merge leftmost first: aaa -> aa + a.
  EXPECT_EQ(tok.Encode("aaa"), (std::vector<int32_t>{v.Id("aa"), 'a'}));
  EXPECT_EQ(tok.Encode("aaaa"), (std::vector<int32_t>{v.Id("aa"), v.Id("aa")}));
  EXPECT_TRUE(tok.Encode("").empty());
}

TEST(Tokenizer, PiecesNeverMergeAcrossPreTokenizerBoundaries) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  // "hello abc": pieces "hello" and " abc".
  EXPECT_EQ(tok.Encode("hello abc"), (std::vector<int32_t>{v.Id("hello"), v.Id(V(" abc"))}));
  // "b c" splits into "b" and " c": the rank-0 pair (b,c) is never seen.
  EXPECT_EQ(tok.Encode("b c"), (std::vector<int32_t>{'b', ' ', 'c'}));
}

TEST(Tokenizer, Llama3LooksUpWholePieceFirst) {
  TestVocab v = MakeVocab("llama-bpe");
  Tokenizer tok(v.data);
  EXPECT_EQ(tok.pretokenizer().kind(), "llama3");
  EXPECT_EQ(tok.Encode("abc"), (std::vector<int32_t>{v.Id("abc")}));
  TestVocab g = MakeVocab("gpt2");
  EXPECT_EQ(Tokenizer(g.data).Encode("abc"), (std::vector<int32_t>{'a', g.Id(V("bc"))}));
}

TEST(Tokenizer, MultibyteUtf8RoundTrips) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  EXPECT_EQ(tok.Encode("é"), (std::vector<int32_t>{v.Id(V("é"))}));
  EXPECT_EQ(tok.Encode("日本語"), Bytes("日本語"));  // no merges: 9 byte tokens
  EXPECT_EQ(tok.Encode("😀"), Bytes("😀"));
  for (std::string s : {"hello abc", "Hello, world! 123", "café é", "日本語 テキスト", "emoji 😀👍",
                        "tabs\tand\nnewlines\r\n  end  ", "it's we'll they'RE"}) {
    auto ids = tok.Encode(s);
    EXPECT_EQ(tok.Decode(ids), s);
    EXPECT_EQ(tok.DecodeText(ids), s);
  }
}

TEST(Tokenizer, InvalidUtf8BytesRoundTripThroughByteTokens) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  std::string bad =
      "a\xFF"
      "b\xC3(\xE6\x97";  // stray byte, broken 2-byte, truncated 3-byte
  auto ids = tok.Encode(bad);
  EXPECT_EQ(ids, Bytes(bad));
  EXPECT_EQ(tok.Decode(ids), bad);
  EXPECT_EQ(tok.DecodeText(ids),
            "a\uFFFD"
            "b\uFFFD(\uFFFD");
}

TEST(Tokenizer, SpecialTokensAreMatchedInText) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  int32_t bos = v.Id("<|bos|>"), eot = v.Id("<|eot|>");
  EXPECT_EQ(tok.Encode("<|bos|>hello<|eot|> abc"),
            (std::vector<int32_t>{bos, v.Id("hello"), eot, v.Id(V(" abc"))}));
  EXPECT_EQ(tok.Encode("<|eot|><|eot|>"), (std::vector<int32_t>{eot, eot}));
  // Longest match: user-defined "<|a|>b" wins over control "<|a|>".
  EXPECT_EQ(tok.Encode("<|a|>bc"), (std::vector<int32_t>{v.Id("<|a|>b"), 'c'}));
  EXPECT_EQ(tok.Encode("x<|a|>c"), (std::vector<int32_t>{'x', v.Id("<|a|>"), 'c'}));
  // A partial special string is plain text.
  EXPECT_EQ(tok.Encode("<|bos"), Bytes("<|bos"));
  // parse_special=false: the special's text is ordinary text ("<|", "bos", "|>").
  EXPECT_EQ(tok.Encode("<|bos|>", false), Bytes("<|bos|>"));
  EXPECT_EQ(tok.bos_id(), bos);
  EXPECT_EQ(tok.eot_id(), eot);
}

TEST(Tokenizer, DecodeSpecials) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  std::vector<int32_t> ids = {v.Id("<|bos|>"), v.Id("hello"), v.Id("<|a|>b"), v.Id("<|eot|>")};
  EXPECT_EQ(tok.Decode(ids), "<|bos|>hello<|a|>b<|eot|>");
  // Control tokens vanish with skip_special; user-defined tokens are text and stay.
  EXPECT_EQ(tok.Decode(ids, true), "hello<|a|>b");
}

TEST(Tokenizer, OutOfRangeIdsAreInvalidArgument) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  std::vector<int32_t> ids = {'a', tok.n_vocab()};
  ExpectError([&] { tok.Decode(ids); }, ErrorKind::kInvalidArgument, "out of range");
  ExpectError([&] { tok.TokenBytes(-1); }, ErrorKind::kInvalidArgument, "out of range");
}

TEST(Tokenizer, MissingByteTokenIsAnErrorOnlyWhenNeeded) {
  TestVocab v = MakeVocab();
  v.data.tokens['z'] = "<|not_z|>";  // byte 'z' has no token any more
  v.data.token_type['z'] = 3;
  Tokenizer tok(v.data);
  EXPECT_EQ(tok.Encode("abc"), (std::vector<int32_t>{'a', v.Id(V("bc"))}));
  ExpectError([&] { tok.Encode("z"); }, ErrorKind::kModel, "0x7A");
}

TEST(Tokenizer, LongInputsDoNotBlowUp) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  std::string spaces(200000, ' ');
  auto ids = tok.Encode(spaces + "x");
  EXPECT_EQ(tok.Decode(ids), spaces + "x");
  std::string as(100000, 'a');  // one 100k-byte piece; pairwise merging stays O(n log n)
  ids = tok.Encode(as);
  EXPECT_EQ(ids.size(), 50000u);
  EXPECT_EQ(tok.Decode(ids), as);
  std::string punct(100000, '!');
  EXPECT_EQ(tok.Decode(tok.Encode(punct)), punct);
}

// ---- validation ----

TEST(TokenizerValidation, UnknownPreTokenizerIsUnsupported) {
  TestVocab v = MakeVocab("gpt5-magic");
  ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kUnsupported, "gpt5-magic");
}

TEST(TokenizerValidation, TokenTypeLength) {
  TestVocab v = MakeVocab();
  v.data.token_type.pop_back();
  ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kModel, "tokenizer.ggml.token_type");
}

TEST(TokenizerValidation, TokenTypeValue) {
  TestVocab v = MakeVocab();
  v.data.token_type[5] = 42;
  ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kModel, "tokenizer.ggml.token_type");
}

TEST(TokenizerValidation, EmptyTokenString) {
  TestVocab v = MakeVocab();
  v.data.tokens[260] = "";
  ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kModel, "tokenizer.ggml.tokens");
  v = MakeVocab();
  v.data.tokens.clear();
  v.data.token_type.clear();
  ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kModel, "tokenizer.ggml.tokens");
}

TEST(TokenizerValidation, InvalidUtf8TokenString) {
  TestVocab v = MakeVocab();
  v.data.tokens[260] = "\xFF";
  ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kModel, "tokenizer.ggml.tokens");
}

TEST(TokenizerValidation, SpecialIdsInRange) {
  struct Case {
    int32_t TokenizerData::*field;
    const char* key;
  };
  for (Case c : {Case{&TokenizerData::bos, "tokenizer.ggml.bos_token_id"},
                 Case{&TokenizerData::eos, "tokenizer.ggml.eos_token_id"},
                 Case{&TokenizerData::eot, "tokenizer.ggml.eot_token_id"},
                 Case{&TokenizerData::pad, "tokenizer.ggml.padding_token_id"},
                 Case{&TokenizerData::mask, "tokenizer.ggml.mask_token_id"}}) {
    for (int32_t bad : {-2, 1 << 20}) {
      TestVocab v = MakeVocab();
      v.data.*c.field = bad;
      ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kModel, c.key);
    }
  }
}

TEST(TokenizerValidation, Merges) {
  for (const std::string& bad :
       std::vector<std::string>{"ab", "a  b", "a b c", " ", "a ", "q" + V("\x01") + " b"}) {
    TestVocab v = MakeVocab();
    v.data.merges.push_back(bad);
    ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kModel, "tokenizer.ggml.merges");
  }
  TestVocab v = MakeVocab();
  v.data.merges.push_back("x y");  // both tokens exist, "xy" does not
  ExpectError([&] { Tokenizer t(v.data); }, ErrorKind::kModel, "merged string is not a token");
}

// ---- streaming ----

TEST(Utf8Stream, HoldsBackSplitCharacters) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("\xC3"), "");
  EXPECT_TRUE(d.has_pending());
  EXPECT_EQ(d.Push("\xA9!"), "é!");
  EXPECT_EQ(d.Push("\xE6"), "");
  EXPECT_EQ(d.Push("\x97"), "");
  EXPECT_EQ(d.Push("\xA5\xE6"), "日");
  EXPECT_EQ(d.Push("\x9C\xAC"), "本");
  EXPECT_EQ(d.Push("\xF0\x9F"), "");
  EXPECT_EQ(d.Push("\x98"), "");
  EXPECT_EQ(d.Push("\x80"), "😀");
  EXPECT_FALSE(d.has_pending());
  EXPECT_EQ(d.Flush(), "");
}

TEST(Utf8Stream, InvalidBytesBecomeReplacementCharacters) {
  Utf8StreamDecoder d;
  EXPECT_EQ(d.Push("a\xFF"
                   "b"),
            "a\uFFFDb");
  EXPECT_EQ(d.Push("\xC3"), "");
  EXPECT_EQ(d.Push("a"), "\uFFFDa");  // the broken sequence, then the byte that broke it
  EXPECT_EQ(d.Push("\xE6\x97"), "");
  EXPECT_EQ(d.Flush(), "\uFFFD");  // truncated at end of stream: one replacement
  EXPECT_FALSE(d.has_pending());
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), "\uFFFD\uFFFD");                      // overlong
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");            // surrogate
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");  // > U+10FFFF
  EXPECT_EQ(SanitizeUtf8("\xE6\x97"
                         "x"),
            "\uFFFDx");  // maximal subpart: one
}

TEST(Utf8Stream, TokenByTokenStreamingOfByteTokens) {
  TestVocab v = MakeVocab();
  Tokenizer tok(v.data);
  std::string text = "é日本語😀 hello";
  auto ids = tok.Encode(text);
  Utf8StreamDecoder d;
  std::string all;
  for (int32_t id : ids) {
    std::string chunk = d.Push(tok.TokenBytes(id));
    EXPECT_TRUE(IsValidUtf8(chunk));
    all += chunk;
  }
  all += d.Flush();
  EXPECT_EQ(all, text);
}

}  // namespace
}  // namespace bicache::tokenizer
