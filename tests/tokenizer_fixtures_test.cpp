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

void ExpectFixtures(const Tokenizer& tok, const nlohmann::json& list, const std::string& pre) {
  ASSERT_TRUE(list.is_array()) << pre;
  ASSERT_FALSE(list.empty()) << pre;
  for (const auto& fx : list) {
    std::string text = fx.at("text").get<std::string>();
    std::vector<int32_t> want = fx.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok.Encode(text), want) << pre << " text: " << text;
    // Decoding the reference ids gives the text back (the fixtures hold valid UTF-8 text).
    EXPECT_EQ(tok.Decode(want), text) << pre << " text: " << text;
  }
}

struct Inputs {
  nlohmann::json tok_json, fixtures;
};

bool Load(Inputs* in, std::string* missing) {
  const std::string root = BICACHE_SOURCE_DIR;
  std::string tok_path =
      PathFromEnv("BICACHE_TOKENIZER_JSON", root + "/tools/train/tokenizer.json");
  std::string fix_path =
      PathFromEnv("BICACHE_TOKENIZER_FIXTURES", root + "/tests/data/tokenizer_fixtures.json");
  if (!ReadJson(tok_path, &in->tok_json)) *missing = tok_path;
  if (!ReadJson(fix_path, &in->fixtures)) *missing = fix_path;
  return missing->empty();
}

TEST(TokenizerFixtures, TinyModelMatchesPythonReference) {
  Inputs in;
  std::string missing;
  if (!Load(&in, &missing)) GTEST_SKIP() << "no " << missing;
  Tokenizer tok(FromTrainJson(in.tok_json));
  // The file is {"fixtures": [...], ...}; a bare array is accepted too.
  const nlohmann::json& f = in.fixtures;
  ExpectFixtures(tok, f.is_object() ? f.at("fixtures") : f, tok.pretokenizer().kind());
}

// The same vocabulary under the other pre-tokenizers bpe.py implements ("gpt2" / "gpt2-digits"):
// a model trained with either must tokenize here exactly as it did in training.
TEST(TokenizerFixtures, OtherPreTokenizersMatchPythonReference) {
  Inputs in;
  std::string missing;
  if (!Load(&in, &missing)) GTEST_SKIP() << "no " << missing;
  if (!in.fixtures.is_object() || !in.fixtures.contains("fixtures_by_pre")) {
    GTEST_SKIP() << "fixtures without fixtures_by_pre";
  }
  const auto& by_pre = in.fixtures.at("fixtures_by_pre");
  ASSERT_FALSE(by_pre.empty());
  for (const auto& [pre, list] : by_pre.items()) {
    TokenizerData d = FromTrainJson(in.tok_json);
    d.pre = pre;
    Tokenizer tok(std::move(d));
    EXPECT_EQ(tok.pretokenizer().kind(), pre);
    ExpectFixtures(tok, list, pre);
  }
}

}  // namespace
}  // namespace bicache::tokenizer
