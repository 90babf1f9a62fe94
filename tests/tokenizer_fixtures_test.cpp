// The tiny model's trained tokenizer (tools/train/tokenizer.json, written by tools/train/bpe.py)
// against encodings produced by the Python reference (tests/data/tokenizer_fixtures.json:
// [{"text": ..., "ids": [...]}]). Skipped while either file is absent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tokenizer/tokenizer.h"

#ifndef BICACHE_SOURCE_DIR
#define BICACHE_SOURCE_DIR "."
#endif

namespace bicache::tokenizer {
namespace {

bool ReadJson(const std::string& path, nlohmann::json* out) {
  std::ifstream f(path);
  if (!f) return false;
  *out = nlohmann::json::parse(f);
  return true;
}

std::string PathFromEnv(const char* var, const std::string& fallback) {
  const char* v = std::getenv(var);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

// bpe.py's JSON: {"model","pre","tokens","token_types","merges","special":{text: id}}.
TokenizerData FromTrainJson(const nlohmann::json& j) {
  TokenizerData d;
  d.tokens = j.at("tokens").get<std::vector<std::string>>();
  d.token_type = j.at("token_types").get<std::vector<int32_t>>();
  d.merges = j.at("merges").get<std::vector<std::string>>();
  d.pre = j.value("pre", "default");
  const auto& sp = j.at("special");
  auto id = [&](const char* s) { return sp.contains(s) ? sp.at(s).get<int32_t>() : -1; };
  d.bos = id("<|bos|>");
  d.eos = id("<|eos|>");
  d.eot = id("<|eot|>");
  d.pad = id("<|pad|>");
  d.mask = id("<|mask|>");
  return d;
}

TEST(TokenizerFixtures, TinyModelMatchesPythonReference) {
  const std::string root = BICACHE_SOURCE_DIR;
  nlohmann::json tok_json, fixtures;
  std::string tok_path =
      PathFromEnv("BICACHE_TOKENIZER_JSON", root + "/tools/train/tokenizer.json");
  std::string fix_path =
      PathFromEnv("BICACHE_TOKENIZER_FIXTURES", root + "/tests/data/tokenizer_fixtures.json");
  if (!ReadJson(tok_path, &tok_json)) GTEST_SKIP() << "no " << tok_path;
  if (!ReadJson(fix_path, &fixtures)) GTEST_SKIP() << "no " << fix_path;
  Tokenizer tok(FromTrainJson(tok_json));
  // The file is {"fixtures": [...], ...}; a bare array is accepted too.
  const nlohmann::json& list = fixtures.is_object() ? fixtures.at("fixtures") : fixtures;
  ASSERT_TRUE(list.is_array());
  ASSERT_FALSE(list.empty());
  for (const auto& fx : list) {
    std::string text = fx.at("text").get<std::string>();
    std::vector<int32_t> want = fx.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.Encode(text), want) << "text: " << text;
    // Decoding the reference ids gives the text back (the fixtures hold valid UTF-8 text).
    EXPECT_EQ(tok.Decode(want), text) << "text: " << text;
  }
}

}  // namespace
}  // namespace bicache::tokenizer
