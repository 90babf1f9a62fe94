// Tokenizer::FromGguf on the golden tiny LLaDA / Dream files and on in-memory files with broken
// tokenizer metadata.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/gguf.h"
#include "test_util.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

#ifndef BICACHE_SOURCE_DIR
#define BICACHE_SOURCE_DIR "."
#endif

namespace bicache::tokenizer {
namespace {

using bicache::testing::ExpectError;

using format::GgufFile;
using format::GgufWriter;
using format::Value;

std::string Golden(const char* name) {
  return std::string(BICACHE_SOURCE_DIR) + "/tests/data/golden/" + name;
}

TEST(TokenizerGguf, LoadsGoldenLlada) {
  GgufFile f = GgufFile::Open(Golden("llada-tiny.gguf"));
  Tokenizer tok = Tokenizer::FromGguf(f);
  EXPECT_EQ(tok.pretokenizer().kind(), "llama3");
  EXPECT_EQ(tok.mask_id(), tok.n_vocab() - 1);
  EXPECT_EQ(tok.vocab().Text(tok.mask_id()), "<|mdm_mask|>");
  EXPECT_EQ(tok.vocab().Text(tok.bos_id()), "<|startoftext|>");
  EXPECT_EQ(DetectChatFormat(tok.chat_template()), ChatFormat::kLlada);
  FormattedChat c = FormatChat(ChatFormat::kLlada, {{"user", "Hello there, 123!"}});
  auto ids = tok.Encode(c.text);
  EXPECT_EQ(ids.front(), tok.bos_id());
  EXPECT_EQ(tok.Decode(ids), c.text);
}

TEST(TokenizerGguf, LoadsGoldenDream) {
  GgufFile f = GgufFile::Open(Golden("dream-tiny.gguf"));
  Tokenizer tok = Tokenizer::FromGguf(f);
  EXPECT_EQ(tok.pretokenizer().kind(), "qwen2");
  EXPECT_EQ(tok.vocab().Text(tok.mask_id()), "<|mask|>");
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_EQ(DetectChatFormat(tok.chat_template()), ChatFormat::kDream);
  std::string text = "<|im_start|>user\nWhat's 2+2?<|im_end|>\n";
  EXPECT_EQ(tok.Decode(tok.Encode(text)), text);
}

// A minimal valid tokenizer: byte tokens for "a" and "b" only, one merge, one control token.
GgufWriter MinimalWriter() {
  GgufWriter w;
  w.SetValue("general.architecture", Value::Str("llada"));
  w.SetValue("tokenizer.ggml.model", Value::Str("gpt2"));
  w.SetValue("tokenizer.ggml.pre", Value::Str("gpt2"));
  w.SetValue("tokenizer.ggml.tokens", Value::StrArray({"a", "b", "ab", "<|m|>"}));
  w.SetValue("tokenizer.ggml.token_type", Value::I32Array({1, 1, 1, 3}));
  w.SetValue("tokenizer.ggml.merges", Value::StrArray({"a b"}));
  w.SetValue("tokenizer.ggml.mask_token_id", Value::U32(3));
  return w;
}

Tokenizer Load(const GgufWriter& w) {
  std::vector<uint8_t> bytes = w.ToBytes();
  GgufFile f = GgufFile::FromBytes(bytes);
  return Tokenizer::FromGguf(f);
}

TEST(TokenizerGguf, MinimalFileLoads) {
  Tokenizer tok = Load(MinimalWriter());
  EXPECT_EQ(tok.Encode("ab<|m|>"), (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(tok.mask_id(), 3);
  EXPECT_EQ(tok.bos_id(), -1);
}

TEST(TokenizerGguf, RejectsBadMetadata) {
  GgufWriter w = MinimalWriter();
  w.SetValue("tokenizer.ggml.model", Value::Str("llama"));
  ExpectError([&] { Load(w); }, ErrorKind::kUnsupported, "llama");

  w = MinimalWriter();
  w.SetValue("tokenizer.ggml.token_type", Value::I32Array({1, 1, 1}));
  ExpectError([&] { Load(w); }, ErrorKind::kModel, "tokenizer.ggml.token_type");

  w = MinimalWriter();
  w.SetValue("tokenizer.ggml.mask_token_id", Value::U32(4));
  ExpectError([&] { Load(w); }, ErrorKind::kModel, "tokenizer.ggml.mask_token_id");

  w = MinimalWriter();
  w.SetValue("tokenizer.ggml.merges", Value::StrArray({"b a"}));
  ExpectError([&] { Load(w); }, ErrorKind::kModel, "tokenizer.ggml.merges");

  w = MinimalWriter();
  w.SetValue("tokenizer.ggml.pre", Value::Str("mystery"));
  ExpectError([&] { Load(w); }, ErrorKind::kUnsupported, "mystery");

  w = MinimalWriter();
  w.SetValue("tokenizer.ggml.tokens", Value::U32(7));  // wrong type
  ExpectError([&] { Load(w); }, ErrorKind::kModel, "tokenizer.ggml.tokens");
}

// A converted LLaDA2.x / Ling 2.0 file says bailingmoe2 (llama.cpp's name); it loads and encodes.
TEST(TokenizerGguf, BailingMoe2Loads) {
  GgufWriter w = MinimalWriter();
  w.SetValue("tokenizer.ggml.pre", Value::Str("bailingmoe2"));
  Tokenizer tok = Load(w);
  EXPECT_EQ(tok.pre(), "bailingmoe2");
  EXPECT_EQ(tok.pretokenizer().kind(), "bailingmoe");
  EXPECT_EQ(tok.Encode("abab"), (std::vector<int32_t>{2, 2}));
}

TEST(TokenizerGguf, PreDefaultsToGpt2) {
  GgufWriter w2;  // no tokenizer.ggml.pre, no token_type
  w2.SetValue("tokenizer.ggml.model", Value::Str("gpt2"));
  w2.SetValue("tokenizer.ggml.tokens", Value::StrArray({"a", "b", "ab"}));
  w2.SetValue("tokenizer.ggml.merges", Value::StrArray({"a b"}));
  Tokenizer tok = Load(w2);
  EXPECT_EQ(tok.pre(), "default");
  EXPECT_EQ(tok.pretokenizer().kind(), "gpt2");
  EXPECT_EQ(tok.Encode("abab"), (std::vector<int32_t>{2, 2}));
}

}  // namespace
}  // namespace bicache::tokenizer
