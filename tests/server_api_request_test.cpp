// /v1/completions and /v1/chat/completions bodies as the server parses them: what a client gets
// for an omitted field, that every sampler field reaches the engine, and, for each bad body, the
// HTTP status and the OpenAI error object ({"message","type","param","code"}) the client reads.
// The model is tests/data/golden/llada-tiny.gguf: context 512, vocabulary 300, mask token 299.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "server/api_request.h"
#include "test_util.h"

namespace bicache::server {
namespace {

using bicache::testing::DataPath;
using nlohmann::json;

class ApiRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    lm_ = engine::LoadedModel::Load(DataPath("golden/llada-tiny.gguf"));
  }
  static void TearDownTestSuite() { lm_.reset(); }

  ParsedRequest Parse(const std::string& body, bool chat = false) const {
    return ParseGenerationRequest(body, chat, *lm_, limits_);
  }
  ParsedRequest Parse(const json& body, bool chat = false) const {
    return Parse(body.dump(), chat);
  }

  // The error body a client receives for `body` (and checks the status is 400); a parse that
  // succeeds is a failure.
  json ErrorFor(const std::string& body, bool chat = false) const {
    try {
      Parse(body, chat);
    } catch (const ApiException& e) {
      EXPECT_EQ(e.error().status, 400) << body;
      EXPECT_STREQ(e.what(), e.error().message.c_str());
      return ErrorBody(e.error()).at("error");
    }
    ADD_FAILURE() << "accepted: " << body;
    return json::object();
  }
  json ErrorFor(const json& body, bool chat = false) const { return ErrorFor(body.dump(), chat); }

  // Expects a 400 invalid_request_error with exactly this message and param (and code, or null).
  void ExpectRejected(const json& body, const std::string& message, const json& param,
                      const json& code = nullptr, bool chat = false) const {
    SCOPED_TRACE(body.dump());
    const json e = ErrorFor(body, chat);
    EXPECT_EQ(e.value("message", ""), message);
    EXPECT_EQ(e.value("type", ""), "invalid_request_error");
    EXPECT_EQ(e.value("param", json()), param);
    EXPECT_EQ(e.value("code", json()), code);
  }
  // A completions body with `field` set to `value` on top of a valid prompt.
  static json With(const std::string& field, const json& value) {
    json b = {{"prompt", "hello"}};
    b[field] = value;
    return b;
  }

  static std::vector<int32_t> Ids(int n) { return std::vector<int32_t>(n, 5); }

  static std::unique_ptr<engine::LoadedModel> lm_;
  ServerLimits limits_;
};

std::unique_ptr<engine::LoadedModel> ApiRequestTest::lm_;

// ---- what an omitted field means ------------------------------------------------------------

TEST_F(ApiRequestTest, CompletionDefaults) {
  const ParsedRequest r = Parse(json{{"prompt", "hello"}});
  EXPECT_FALSE(r.chat);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  const engine::Prompt p = lm_->PlainPrompt("", "hello");
  EXPECT_EQ(r.options.prompt, p.tokens);
  EXPECT_EQ(r.options.prefix_len, p.prefix_len);
  const diffusion::SamplerConfig& s = r.options.sampler;
  EXPECT_EQ(s.gen_length, limits_.default_max_tokens);
  EXPECT_EQ(s.block_length, s.gen_length);  // one block
  EXPECT_EQ(s.steps, s.gen_length);         // one step per token, as the LLaDA reference runs
  EXPECT_EQ(s.algorithm, diffusion::Algorithm::kLowConfidence);
  EXPECT_EQ(s.temperature, 0.0f);
  EXPECT_EQ(s.top_p, 1.0f);
  EXPECT_EQ(s.top_k, 0);
  EXPECT_EQ(s.threshold, 0.0f);
  EXPECT_EQ(s.alg_temp, 0.0f);
  EXPECT_EQ(s.eps, 1e-3f);
  EXPECT_EQ(s.cfg_scale, 0.0f);
  EXPECT_EQ(s.seed, 0u);
  EXPECT_EQ(s.mask_id, 299);
  EXPECT_EQ(s.stop_ids, lm_->stop_ids());
  EXPECT_EQ(r.options.cache, limits_.default_cache);
  EXPECT_EQ(r.options.refresh_interval, limits_.default_refresh);
}

TEST_F(ApiRequestTest, NullMeansAbsent) {
  const ParsedRequest r = Parse(json{{"prompt", "hello"},
                                     {"max_tokens", nullptr},
                                     {"temperature", nullptr},
                                     {"stream", nullptr},
                                     {"stop", nullptr},
                                     {"n", nullptr},
                                     {"model", nullptr},
                                     {"cache", nullptr}});
  EXPECT_EQ(r.options.sampler.gen_length, limits_.default_max_tokens);
  EXPECT_EQ(r.options.sampler.temperature, 0.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.options.cache, limits_.default_cache);
}

TEST_F(ApiRequestTest, DefaultMaxTokensIsClippedToTheLimitAndTheContextLeft) {
  limits_.default_max_tokens = 64;
  limits_.max_tokens_limit = 16;
  EXPECT_EQ(Parse(json{{"prompt", "hello"}}).options.sampler.gen_length, 16);
  limits_.max_tokens_limit = 1024;
  // 500 prompt tokens in a 512-token context leave 12.
  EXPECT_EQ(Parse(json{{"prompt", Ids(500)}}).options.sampler.gen_length, 12);
}

TEST_F(ApiRequestTest, DefaultStepsAreCappedAndKeptAMultipleOfTheBlocks) {
  limits_.max_steps = 30;
  // 64 tokens in 4 blocks: one step per token would be 64, the cap makes it 30, and 28 is the
  // largest multiple of 4 below.
  const ParsedRequest r =
      Parse(json{{"prompt", "hello"}, {"max_tokens", 64}, {"block_length", 16}});
  EXPECT_EQ(r.options.sampler.steps, 28);
  EXPECT_EQ(r.options.refresh_interval, std::min(limits_.default_refresh, 30));
}

TEST_F(ApiRequestTest, DefaultCacheAndRefreshComeFromTheServer) {
  limits_.default_cache = engine::ParseCacheMode("llm");
  limits_.default_refresh = 3;
  const ParsedRequest r = Parse(json{{"prompt", "hello"}});
  EXPECT_EQ(r.options.cache, engine::ParseCacheMode("llm"));
  EXPECT_EQ(r.options.refresh_interval, 3);
}

// ---- every field reaches the engine -------------------------------------------------------

TEST_F(ApiRequestTest, EverySamplerFieldIsMapped) {
  const ParsedRequest r = Parse(json{{"prompt", "hello"},
                                     {"model", "anything"},
                                     {"max_tokens", 32},
                                     {"block_length", 8},
                                     {"steps", 16},
                                     {"algorithm", "maskgit_plus"},
                                     {"temperature", 0.7},
                                     {"top_p", 0.9},
                                     {"top_k", 40},
                                     {"alg_temp", 0.5},
                                     {"eps", 0.01},
                                     {"cfg", 1.5},
                                     {"seed", 12345},
                                     {"cache", "none"},
                                     {"refresh", 4},
                                     {"stream", true},
                                     {"stream_options", {{"include_usage", true}}},
                                     {"n", 1},
                                     {"stop", json::array()}});
  const diffusion::SamplerConfig& s = r.options.sampler;
  EXPECT_EQ(s.gen_length, 32);
  EXPECT_EQ(s.block_length, 8);
  EXPECT_EQ(s.steps, 16);
  EXPECT_EQ(s.algorithm, diffusion::Algorithm::kMaskgitPlus);
  EXPECT_EQ(s.temperature, 0.7f);
  EXPECT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_EQ(s.alg_temp, 0.5f);
  EXPECT_EQ(s.eps, 0.01f);
  EXPECT_EQ(s.cfg_scale, 1.5f);
  EXPECT_EQ(s.seed, 12345u);
  EXPECT_EQ(r.options.cache, engine::ParseCacheMode("none"));
  EXPECT_EQ(r.options.refresh_interval, 4);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);

  // threshold needs a confidence-ranked algorithm and no alg_temp, so it gets its own body.
  const ParsedRequest t = Parse(json{{"prompt", "hello"}, {"threshold", 0.9}, {"seed", 7}});
  EXPECT_EQ(t.options.sampler.threshold, 0.9f);
  EXPECT_EQ(t.options.sampler.seed, 7u);
}

TEST_F(ApiRequestTest, EveryAlgorithmNameIsAccepted) {
  const std::pair<const char*, diffusion::Algorithm> kNames[] = {
      {"low_confidence", diffusion::Algorithm::kLowConfidence},
      {"random", diffusion::Algorithm::kRandom},
      {"origin", diffusion::Algorithm::kOrigin},
      {"maskgit_plus", diffusion::Algorithm::kMaskgitPlus},
      {"topk_margin", diffusion::Algorithm::kTopkMargin},
      {"entropy", diffusion::Algorithm::kEntropy}};
  for (const auto& [name, alg] : kNames) {
    EXPECT_EQ(Parse(With("algorithm", name)).options.sampler.algorithm, alg) << name;
  }
}

TEST_F(ApiRequestTest, IntegralFloatsCountAsIntegers) {
  // Some clients send 8.0 for 8.
  const ParsedRequest r = Parse(json{{"prompt", "hello"}, {"max_tokens", 8.0}, {"steps", 4.0}});
  EXPECT_EQ(r.options.sampler.gen_length, 8);
  EXPECT_EQ(r.options.sampler.steps, 4);
}

TEST_F(ApiRequestTest, MaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(Parse(With("max_completion_tokens", 8)).options.sampler.gen_length, 8);
  // OpenAI: max_completion_tokens replaces the deprecated max_tokens, so it wins, in either order.
  json both = With("max_completion_tokens", 8);
  both["max_tokens"] = 16;
  EXPECT_EQ(Parse(both).options.sampler.gen_length, 8);
  both["max_tokens"] = 0;  // the losing field is not read at all
  EXPECT_EQ(Parse(both).options.sampler.gen_length, 8);
  both["max_completion_tokens"] = nullptr;  // null is absent: max_tokens again
  both["max_tokens"] = 16;
  EXPECT_EQ(Parse(both).options.sampler.gen_length, 16);
  ExpectRejected(With("max_completion_tokens", 0),
                 "'max_completion_tokens' must be between 1 and 1024, got 0",
                 "max_completion_tokens");
  // Errors about the canvas length name the field it came in.
  ExpectRejected(json{{"prompt", "hello"}, {"max_completion_tokens", 8}, {"block_length", 3}},
                 "block_length (3) must divide max_completion_tokens (8)", "block_length");
  ExpectRejected(json{{"prompt", Ids(500)}, {"max_completion_tokens", 100}, {"max_tokens", 4}},
                 "This model's maximum context length is 512 tokens. However, you requested 600 "
                 "tokens (500 in the prompt, 100 for the completion). Please reduce the length of "
                 "the prompt or max_completion_tokens.",
                 "max_completion_tokens", "context_length_exceeded");
}

TEST_F(ApiRequestTest, StreamOptionsWithoutIncludeUsage) {
  const ParsedRequest r =
      Parse(json{{"prompt", "hello"}, {"stream", true}, {"stream_options", json::object()}});
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.include_usage);
}

TEST_F(ApiRequestTest, StreamOptionsCanvasOnlyWithStream) {
  const ParsedRequest r = Parse(
      json{{"prompt", "hello"}, {"stream", true}, {"stream_options", {{"include_canvas", true}}}});
  EXPECT_TRUE(r.include_canvas);
  EXPECT_FALSE(r.include_usage);
  ExpectRejected(json{{"prompt", "hello"}, {"stream_options", {{"include_canvas", true}}}},
                 "'stream_options' is only allowed when 'stream' is true", "stream_options");
  ExpectRejected(
      json{{"prompt", "hello"}, {"stream", true}, {"stream_options", {{"include_logits", true}}}},
      "'stream_options.include_logits' is not supported (stream_options takes "
      "include_usage and include_canvas)",
      "stream_options.include_logits");
}

TEST_F(ApiRequestTest, PromptForms) {
  const std::vector<int32_t> hello = lm_->PlainPrompt("", "hello").tokens;
  EXPECT_EQ(Parse(json{{"prompt", json::array({"hello"})}}).options.prompt, hello);
  const ParsedRequest ids = Parse(json{{"prompt", {1, 2, 299}}});
  EXPECT_EQ(ids.options.prompt, (std::vector<int32_t>{1, 2, 299}));
  EXPECT_EQ(ids.options.prefix_len, -1);  // automatic

  // A declared prefix is tokenized in front of the prompt and marked shared.
  const ParsedRequest pre = Parse(json{{"prompt", "hello"}, {"prefix", "A shared document."}});
  const engine::Prompt want = lm_->PlainPrompt("A shared document.", "hello");
  EXPECT_EQ(pre.options.prompt, want.tokens);
  EXPECT_EQ(pre.options.prefix_len, want.prefix_len);
  EXPECT_GT(pre.options.prefix_len, 0);
  const ParsedRequest pre_ids = Parse(json{{"prompt", {1, 2}}, {"prefix", "A shared document."}});
  const std::vector<int32_t> doc = lm_->tokenizer().Encode("A shared document.");
  EXPECT_EQ(pre_ids.options.prefix_len, static_cast<int>(doc.size()));
  EXPECT_EQ(pre_ids.options.prompt.size(), doc.size() + 2);
  EXPECT_EQ(pre_ids.options.prompt.back(), 2);
}

TEST_F(ApiRequestTest, ChatMessagesBecomeTheChatPrompt) {
  const json body = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", "Hi"}},
        {{"role", "assistant"}, {"content", nullptr}},
        {{"role", "user"},
         {"content",
          {{{"type", "text"}, {"text", "What is "}}, {{"type", "text"}, {"text", "2+2?"}}}}}}}};
  const ParsedRequest r = Parse(body, /*chat=*/true);
  EXPECT_TRUE(r.chat);
  // Content parts are concatenated; an assistant turn without content is empty.
  const engine::Prompt want = lm_->ChatPrompt(
      {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", ""}, {"user", "What is 2+2?"}});
  EXPECT_EQ(r.options.prompt, want.tokens);
  EXPECT_EQ(r.options.prefix_len, want.prefix_len);
  EXPECT_GT(r.options.prefix_len, 0);  // everything before the last user turn is shared
}

TEST_F(ApiRequestTest, ADeveloperMessageIsASystemMessage) {
  // OpenAI's newer SDKs send the system prompt under the role "developer".
  const json body = {
      {"messages",
       {{{"role", "developer"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}}};
  const engine::Prompt want = lm_->ChatPrompt({{"system", "Be brief."}, {"user", "Hi"}});
  EXPECT_EQ(Parse(body, /*chat=*/true).options.prompt, want.tokens);
}

// ---- the error a client sees ----------------------------------------------------------------

TEST_F(ApiRequestTest, ErrorBodyHasTheOpenAiShape) {
  ApiError e;
  e.message = "m";
  EXPECT_EQ(ErrorBody(e), json::parse(R"({"error":{"message":"m","type":"invalid_request_error",
                                           "param":null,"code":null}})"));
  e.param = "max_tokens";
  e.code = "context_length_exceeded";
  e.type = "server_error";
  EXPECT_EQ(ErrorBody(e), json::parse(R"({"error":{"message":"m","type":"server_error",
                                           "param":"max_tokens","code":"context_length_exceeded"}})"));
}

TEST_F(ApiRequestTest, BodyThatIsNotAJsonObject) {
  const json e = ErrorFor(std::string("{\"prompt\": "));
  EXPECT_EQ(e.at("message"), "the request body is not valid JSON");
  EXPECT_TRUE(e.at("param").is_null());
  EXPECT_EQ(ErrorFor(std::string("[1]")).at("message"),
            "the request body must be a JSON object, got array");
  EXPECT_EQ(ErrorFor(std::string("\"hi\"")).at("message"),
            "the request body must be a JSON object, got string");
}

TEST_F(ApiRequestTest, WrongTypes) {
  ExpectRejected(With("model", 5), "'model' must be a string, got 5", "model");
  ExpectRejected(With("max_tokens", "8"), "'max_tokens' must be an integer, got \"8\"",
                 "max_tokens");
  ExpectRejected(With("max_tokens", 1.5), "'max_tokens' must be an integer, got 1.5", "max_tokens");
  ExpectRejected(With("steps", true), "'steps' must be an integer, got true", "steps");
  ExpectRejected(With("seed", "x"), "'seed' must be an integer, got \"x\"", "seed");
  ExpectRejected(With("temperature", "hot"), "'temperature' must be a number, got \"hot\"",
                 "temperature");
  ExpectRejected(With("top_p", false), "'top_p' must be a number, got false", "top_p");
  ExpectRejected(With("stream", "yes"), "'stream' must be a boolean, got \"yes\"", "stream");
  ExpectRejected(With("stream_options", 1), "'stream_options' must be an object", "stream_options");
  ExpectRejected(With("stream_options", {{"include_usage", 1}}),
                 "'include_usage' must be a boolean, got 1", "include_usage");
  ExpectRejected(With("algorithm", 5), "'algorithm' must be a string, got 5", "algorithm");
  ExpectRejected(With("cache", 3), "'cache' must be a string, got 3", "cache");
  ExpectRejected(With("prefix", 3), "'prefix' must be a string, got 3", "prefix");
}

TEST_F(ApiRequestTest, QuotedValuesAreShortAndNeverAStructure) {
  ExpectRejected(With("stream", {{"a", 1}}), "'stream' must be a boolean, got an object", "stream");
  ExpectRejected(With("stream", {1, 2}), "'stream' must be a boolean, got an array", "stream");
  // A long value is cut to 77 characters of its JSON plus "...".
  const std::string long_text(100, 'a');
  ExpectRejected(With("stream", long_text),
                 "'stream' must be a boolean, got \"" + std::string(76, 'a') + "...", "stream");
}

TEST_F(ApiRequestTest, OutOfRangeIntegers) {
  ExpectRejected(With("max_tokens", 0), "'max_tokens' must be between 1 and 1024, got 0",
                 "max_tokens");
  ExpectRejected(With("max_tokens", -5), "'max_tokens' must be between 1 and 1024, got -5",
                 "max_tokens");
  ExpectRejected(With("max_tokens", 1025), "'max_tokens' must be between 1 and 1024, got 1025",
                 "max_tokens");
  ExpectRejected(With("max_tokens", 18446744073709551615u),
                 "'max_tokens' must be between 1 and 1024, got 18446744073709551615", "max_tokens");
  ExpectRejected(With("max_tokens", 1e300), "'max_tokens' must be between 1 and 1024, got 1e+300",
                 "max_tokens");
  ExpectRejected(json{{"prompt", "hello"}, {"max_tokens", 8}, {"block_length", 9}},
                 "block_length (9) must divide max_tokens (8)", "block_length");
  ExpectRejected(With("steps", 2000), "'steps' must be between 1 and 1024, got 2000", "steps");
  ExpectRejected(With("top_k", -1), "'top_k' must be between 0 and 2147483647, got -1", "top_k");
  // The vocabulary bound is the engine's (engine::CheckRequest), in the API's words.
  ExpectRejected(With("top_k", 301), "top_k must be at most the vocabulary size, 300 (got 301)",
                 "top_k");
  ExpectRejected(With("seed", -1), "'seed' must be between 0 and 9223372036854775807, got -1",
                 "seed");
  ExpectRejected(With("refresh", -1), "'refresh' must be between 0 and 1024, got -1", "refresh");
  // The server's limits are the bounds a client is told.
  limits_.max_tokens_limit = 16;
  limits_.max_steps = 8;
  ExpectRejected(With("max_tokens", 17), "'max_tokens' must be between 1 and 16, got 17",
                 "max_tokens");
  ExpectRejected(json{{"prompt", "hello"}, {"max_tokens", 8}, {"steps", 9}},
                 "'steps' must be between 1 and 8, got 9", "steps");
}

TEST_F(ApiRequestTest, OutOfRangeSamplerValuesNameTheBodyField) {
  // Quoted as sent (the sampler judges the float it holds).
  ExpectRejected(With("temperature", 3), "temperature must be between 0 and 2 (got 3)",
                 "temperature");
  ExpectRejected(With("temperature", 2.5), "temperature must be between 0 and 2 (got 2.5)",
                 "temperature");
  ExpectRejected(With("temperature", -0.1), "temperature must be between 0 and 2 (got -0.1)",
                 "temperature");
  ExpectRejected(With("temperature", 2.0000000001),
                 "temperature must be between 0 and 2 (got 2.0000000001)", "temperature");
  ExpectRejected(With("top_p", 0), "top_p must be in (0, 1] (got 0)", "top_p");
  // Just above 1 rounds to 1 as a float: still refused, quoting the value that was sent.
  ExpectRejected(With("top_p", 1.0000001), "top_p must be in (0, 1] (got 1.0000001)", "top_p");
  ExpectRejected(With("eps", 1), "eps must be in (0, 1) (got 1)", "eps");
  ExpectRejected(With("eps", 0), "eps must be in (0, 1) (got 0)", "eps");
  ExpectRejected(With("threshold", 1), "threshold must be in [0, 1), 0 = off (got 1)", "threshold");
  ExpectRejected(With("cfg", -1), "cfg (cfg_scale) must be a finite value >= 0, 0 = off (got -1)",
                 "cfg");
  ExpectRejected(With("alg_temp", -0.5), "alg_temp must be a finite value >= 0, 0 = off (got -0.5)",
                 "alg_temp");
  ExpectRejected(json{{"prompt", "hello"}, {"max_tokens", 8}, {"block_length", 3}},
                 "block_length (3) must divide max_tokens (8)", "block_length");
  ExpectRejected(json{{"prompt", "hello"}, {"max_tokens", 8}, {"block_length", 2}, {"steps", 6}},
                 "steps (6) must be a multiple of the number of blocks (4 = max_tokens / "
                 "block_length)",
                 "steps");
}

TEST_F(ApiRequestTest, SamplerCombinationsThatCannotRun) {
  ExpectRejected(json{{"prompt", "hello"}, {"algorithm", "random"}, {"threshold", 0.5}},
                 "threshold needs a confidence-ranked algorithm (low_confidence, maskgit_plus, "
                 "topk_margin); 'random' has none",
                 "threshold");
  ExpectRejected(json{{"prompt", "hello"}, {"algorithm", "entropy"}, {"threshold", 0.5}},
                 "threshold cannot be used with algorithm entropy (its confidence, -entropy, is "
                 "<= 0)",
                 "threshold");
  // The sampler's "(got --algorithm low_confidence)" is replaced by the alg_temp value sent.
  ExpectRejected(With("alg_temp", 0.5),
                 "alg_temp applies to maskgit_plus, topk_margin and entropy only (got 0.5)",
                 "alg_temp");
  ExpectRejected(json{{"prompt", "hello"},
                      {"algorithm", "maskgit_plus"},
                      {"alg_temp", 0.5},
                      {"threshold", 0.5}},
                 "alg_temp cannot be combined with threshold", "alg_temp");
  // Guidance runs the prompt masked, which a cached prefix cannot stand for.
  ExpectRejected(With("cfg", 1.5),
                 "classifier-free guidance (cfg) masks the prompt, so it cannot reuse a cached "
                 "prefix: use cache none or dual",
                 "cfg");
  EXPECT_EQ(
      Parse(json{{"prompt", "hello"}, {"cfg", 1.5}, {"cache", "dual"}}).options.sampler.cfg_scale,
      1.5f);
}

TEST_F(ApiRequestTest, UnknownAlgorithmAndCacheMode) {
  ExpectRejected(With("algorithm", "greedy"),
                 "algorithm: unknown algorithm 'greedy' (valid: low_confidence, random, origin, "
                 "maskgit_plus, topk_margin, entropy)",
                 "algorithm");
  ExpectRejected(
      With("cache", "fast"),
      "'cache': cache mode 'fast': unknown mode 'fast' (valid: none, llm, fixed:B, bicache, "
      "prefix, dual, and X+dual such as bicache+dual)",
      "cache");
}

TEST_F(ApiRequestTest, NAndStreamHandling) {
  EXPECT_NO_THROW(Parse(With("n", 1)));
  EXPECT_NO_THROW(Parse(With("n", 1.0)));
  const std::string n_msg =
      "'n' must be 1: this server returns one choice per request (send n requests for n answers), "
      "got ";
  ExpectRejected(With("n", 2), n_msg + "2", "n");
  ExpectRejected(With("n", 0), n_msg + "0", "n");
  ExpectRejected(With("n", -3), n_msg + "-3", "n");
  ExpectRejected(With("n", "2"), "'n' must be an integer, got \"2\"", "n");
  EXPECT_FALSE(Parse(With("stream", false)).stream);
  EXPECT_TRUE(Parse(With("stream", true)).stream);
}

TEST_F(ApiRequestTest, StopStrings) {
  EXPECT_EQ(Parse(With("stop", "\n")).stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(Parse(With("stop", {"a", "END", "\n\n", "x"})).stop,
            (std::vector<std::string>{"a", "END", "\n\n", "x"}));
  EXPECT_TRUE(Parse(With("stop", json::array())).stop.empty());  // an empty list asks for nothing
  EXPECT_TRUE(Parse(json{{"prompt", "hello"}}).stop.empty());
  EXPECT_EQ(
      Parse(json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stop", "Q:"}}, true).stop,
      std::vector<std::string>{"Q:"});
  ExpectRejected(With("stop", {"a", "b", "c", "d", "e"}), "'stop' takes at most 4 strings, got 5",
                 "stop");
  ExpectRejected(With("stop", ""), "'stop' strings must not be empty", "stop");
  ExpectRejected(With("stop", {"a", ""}), "'stop' strings must not be empty", "stop");
  ExpectRejected(With("stop", 1), "'stop' must be a string or an array of strings, got 1", "stop");
  ExpectRejected(With("stop", {"a", 1}), "'stop' strings must be strings, got 1", "stop");
  ExpectRejected(With("stop", std::string(257, 'x')),
                 "'stop' strings must be at most 256 bytes, got one of 257", "stop");
  EXPECT_NO_THROW(Parse(With("stop", std::string(256, 'x'))));
}

// Every OpenAI field this server does not act on: refused naming it, unless its value asks for
// nothing (clients send those defaults), or accepted when it cannot change the answer.
TEST_F(ApiRequestTest, UnsupportedFieldsAreRefusedByName) {
  struct Case {
    const char* field;
    json value;
    json noop;  // null: no value is a no-op
    bool chat;
    const char* why;
  };
  const std::string no_logprobs = "this server returns no log probabilities; ";
  const std::string penalty =
      "a diffusion model commits its canvas in parallel, with no token history to penalise; send 0 "
      "or leave it out";
  const Case cases[] = {
      {"presence_penalty", 0.5, 0, false, penalty.c_str()},
      {"presence_penalty", -1, 0.0, true, penalty.c_str()},
      {"frequency_penalty", 1, 0, true, penalty.c_str()},
      {"logit_bias",
       {{"5", 10}},
       json::object(),
       false,
       "the sampler takes no per-token bias; send {} or leave it out"},
      {"logit_bias",
       {{"5", -100}},
       json::object(),
       true,
       "the sampler takes no per-token bias; send {} or leave it out"},
      {"logprobs", 0, nullptr, false, "this server returns no log probabilities; leave it out"},
      {"logprobs", true, false, true,
       "this server returns no log probabilities; send false or leave it out"},
      {"top_logprobs", 3, 0, true,
       "this server returns no log probabilities; send 0 or leave it out"},
      {"echo", true, false, false,
       "the prompt is not repeated in the answer; send false or leave it out"},
      {"suffix", "end", "", false,
       "text after the completion (insertion) is not supported; send \"\" or leave it out"},
      {"best_of", 3, 1, false,
       "this server generates one completion per request; send 1 or leave it out"},
      {"tools",
       {{{"type", "function"}}},
       json::array(),
       true,
       "this server has no tool calling; send [] or leave it out"},
      {"functions",
       {{{"name", "f"}}},
       json::array(),
       true,
       "this server has no function calling; send [] or leave it out"},
      {"tool_choice", "required", "none", true,
       "this server has no tool calling; send \"none\" or leave it out"},
      {"function_call",
       {{"name", "f"}},
       "auto",
       true,
       "this server has no function calling; send \"none\" or leave it out"},
      {"response_format",
       {{"type", "json_object"}},
       {{"type", "text"}},
       true,
       "the answer cannot be constrained to JSON; send {\"type\": \"text\"} or leave it out"},
      {"modalities",
       {"text", "audio"},
       {"text"},
       true,
       "this server answers in text only; send [\"text\"] or leave it out"},
      {"audio",
       {{"voice", "alloy"}},
       nullptr,
       true,
       "this server answers in text only; leave it out"},
      {"reasoning_effort", "low", nullptr, true, "the model has no reasoning mode; leave it out"},
      {"verbosity", "low", nullptr, true,
       "the answer's length is set by max_tokens only; leave it out"},
      {"web_search_options", json::object(), nullptr, true,
       "this server has no web search; leave it out"},
  };
  const json chat_base = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.field);
    json body = c.chat ? chat_base : json{{"prompt", "hello"}};
    body[c.field] = c.value;
    ExpectRejected(body, "'" + std::string(c.field) + "' is not supported: " + c.why, c.field,
                   nullptr, c.chat);
    body[c.field] = nullptr;  // null is absent
    EXPECT_NO_THROW(Parse(body, c.chat));
    if (!c.noop.is_null()) {
      body[c.field] = c.noop;
      EXPECT_NO_THROW(Parse(body, c.chat));
    }
  }
  EXPECT_NO_THROW(Parse(json{{"messages", chat_base["messages"]}, {"tool_choice", "auto"}}, true));
}

TEST_F(ApiRequestTest, HarmlessFieldsAreAccepted) {
  EXPECT_NO_THROW(Parse(json{{"prompt", "hello"}, {"user", "u-1"}}));
  EXPECT_NO_THROW(Parse(json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                             {"user", "u-1"},
                             {"metadata", {{"k", "v"}}},
                             {"store", true},
                             {"service_tier", "auto"},
                             {"safety_identifier", "s"},
                             {"prompt_cache_key", "k"},
                             {"prediction", {{"type", "content"}, {"content", "x"}}},
                             {"parallel_tool_calls", false}},
                        true));
}

TEST_F(ApiRequestTest, UnknownAndOtherEndpointFieldsAreRefusedByName) {
  ExpectRejected(With("temprature", 0.5),
                 "Unrecognized request argument supplied: 'temprature' (docs/serving.md lists the "
                 "fields this server takes)",
                 "temprature");
  ExpectRejected(With("min_p", 0.1),
                 "Unrecognized request argument supplied: 'min_p' (docs/serving.md lists the "
                 "fields this server takes)",
                 "min_p");
  EXPECT_NO_THROW(Parse(With("min_p", nullptr)));  // null is absent, known or not
  ExpectRejected(With("messages", json::array()),
                 "'messages' is a /v1/chat/completions field; /v1/completions takes 'prompt' and "
                 "does not accept it",
                 "messages");
  ExpectRejected(With("tools", json::array()),
                 "'tools' is a /v1/chat/completions field; /v1/completions takes 'prompt' and "
                 "does not accept it",
                 "tools");
  ExpectRejected(json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"prompt", "x"}},
                 "'prompt' is a /v1/completions field; /v1/chat/completions takes 'messages' and "
                 "does not accept it",
                 "prompt", nullptr, /*chat=*/true);
  ExpectRejected(json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"echo", false}},
                 "'echo' is a /v1/completions field; /v1/chat/completions takes 'messages' and "
                 "does not accept it",
                 "echo", nullptr, /*chat=*/true);
}

TEST_F(ApiRequestTest, BadPrompts) {
  ExpectRejected(json{{"max_tokens", 8}}, "'prompt' is required", "prompt");
  ExpectRejected(json{{"prompt", ""}}, "'prompt' must not be empty", "prompt");
  ExpectRejected(json{{"prompt", json::array()}}, "'prompt' must not be empty", "prompt");
  ExpectRejected(json{{"prompt", json::array({""})}}, "'prompt' must not be empty", "prompt");
  ExpectRejected(json{{"prompt", {"a", "b"}}},
                 "batched prompts are not supported: send one prompt per request", "prompt");
  ExpectRejected(json{{"prompt", {{1, 2}, {3}}}},
                 "batched prompts are not supported: send one prompt per request", "prompt");
  ExpectRejected(json{{"prompt", 5}}, "'prompt' must be a string or an array of token ids, got 5",
                 "prompt");
  ExpectRejected(json{{"prompt", {1, "x"}}},
                 "'prompt' must be a string or an array of token ids; got element \"x\"", "prompt");
  ExpectRejected(json{{"prompt", {1, 300}}},
                 "token id 300 in the prompt is outside the vocabulary [0, 300)", "prompt");
  ExpectRejected(json{{"prompt", {-1}}},
                 "'prompt' holds -1, which is not a token id (0 .. 2147483647)", "prompt");
}

TEST_F(ApiRequestTest, BadMessages) {
  auto rejected = [&](const json& messages, const std::string& message, const std::string& param) {
    ExpectRejected(json{{"messages", messages}}, message, param, nullptr, /*chat=*/true);
  };
  ExpectRejected(json{{"max_tokens", 8}}, "'messages' is required", "messages", nullptr, true);
  rejected(json::object(), "'messages' must be an array of message objects", "messages");
  rejected(json::array(), "'messages' must not be empty", "messages");
  rejected({1}, "'messages[0]' must be an object, got 1", "messages[0]");
  rejected({{{"content", "hi"}}}, "'messages[0].role' must be a string", "messages[0].role");
  rejected({{{"role", "tool"}, {"content", "hi"}}},
           "'messages[0].role' must be system, developer, user or assistant, got 'tool'",
           "messages[0].role");
  rejected({{{"role", "system"}, {"content", "s"}}, {{"role", "user"}}},
           "'messages[1].content' is required", "messages[1].content");
  rejected({{{"role", "user"}, {"content", 5}}},
           "'messages[0].content' must be a string or an array of text parts, got 5",
           "messages[0].content");
  rejected({{{"role", "user"}, {"content", {{{"type", "image_url"}, {"text", "x"}}}}}},
           "'messages[0].content' parts must be {\"type\": \"text\", \"text\": string}",
           "messages[0].content");
  // The chat template's own refusal reaches the client under 'messages'.
  const json e = ErrorFor(json{{"messages", {{{"role", "system"}, {"content", "s"}}}}}, true);
  EXPECT_NE(e.value("message", "").find("no user message"), std::string::npos) << e;
  EXPECT_EQ(e.value("param", json()), "messages");
}

TEST_F(ApiRequestTest, ContextAndPromptLimits) {
  ExpectRejected(json{{"prompt", Ids(500)}, {"max_tokens", 100}},
                 "This model's maximum context length is 512 tokens. However, you requested 600 "
                 "tokens (500 in the prompt, 100 for the completion). Please reduce the length of "
                 "the prompt or max_tokens.",
                 "max_tokens", "context_length_exceeded");
  // With no max_tokens asked for, a prompt that fills the context is the prompt's fault.
  ExpectRejected(json{{"prompt", Ids(512)}},
                 "This model's maximum context length is 512 tokens. However, there are 512 "
                 "tokens in the prompt, which leaves no room for the completion. Please reduce the "
                 "length of the prompt.",
                 "prompt", "context_length_exceeded");
  limits_.max_prompt_tokens = 4;
  ExpectRejected(json{{"prompt", Ids(5)}},
                 "the prompt has 5 tokens, more than this server accepts (4)", "prompt",
                 "prompt_too_long");
  EXPECT_NO_THROW(Parse(json{{"prompt", Ids(4)}}));
}

TEST_F(ApiRequestTest, ChatContextErrorsNameTheMessages) {
  const std::string text(2000, 'x');
  const json body = {{"messages", {{{"role", "user"}, {"content", text}}}}};
  const int n = static_cast<int>(lm_->ChatPrompt({{"user", text}}).tokens.size());
  ASSERT_GE(n, 512);
  ExpectRejected(body,
                 "This model's maximum context length is 512 tokens. However, there are " +
                     std::to_string(n) +
                     " tokens in the messages, which leaves no room for the completion. Please "
                     "reduce the length of the messages.",
                 "messages", "context_length_exceeded", /*chat=*/true);
  limits_.max_prompt_tokens = 4;
  const json e =
      ErrorFor(json{{"messages", {{{"role", "user"}, {"content", "hello there"}}}}}, true);
  EXPECT_EQ(e.value("param", json()), "messages");
  EXPECT_EQ(e.value("code", json()), "prompt_too_long");
}

}  // namespace
}  // namespace bicache::server
