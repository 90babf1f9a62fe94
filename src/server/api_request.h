// OpenAI-style request bodies -> engine requests, with every check the serving contract lists
// (docs/serving.md). Validation happens here, on the HTTP thread, before anything is queued, so a
// bad request costs no engine time and always gets a 4xx with an OpenAI error body.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "engine/cache_mode.h"
#include "engine/loaded_model.h"
#include "engine/request.h"

namespace bicache::server {

// An error answer: HTTP status + the OpenAI body {"error":{"message","type","param","code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

class ApiException : public std::exception {
 public:
  explicit ApiException(ApiError e) : error_(std::move(e)) {}
  const ApiError& error() const { return error_; }
  const char* what() const noexcept override { return error_.message.c_str(); }

 private:
  ApiError error_;
};

nlohmann::json ErrorBody(const ApiError& e);
// ErrorBody as text for `status` (type server_error from 500, else invalid_request_error).
std::string ErrorJson(int status, const std::string& message, const std::string& code = "");
// 400 invalid_request_error for `param`.
[[noreturn]] void BadRequest(const std::string& message, const std::string& param = "",
                             const std::string& code = "");

struct ServerLimits {
  int max_tokens_limit = 1024;  // largest max_tokens (canvas length) accepted
  int default_max_tokens = 64;  // when max_tokens is absent (clipped to the context left)
  int max_steps = 1024;         // largest steps accepted
  int max_prompt_tokens = 0;    // largest prompt in tokens (0 = only the model's context bounds it)
  engine::CacheMode default_cache{engine::PrefixReuse::kBicache, 0, false};
  int default_refresh =
      engine::kDefaultRefreshInterval;  // R when a request omits 'refresh' (0 = off)
};

struct ParsedRequest {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  bool include_canvas = false;  // stream_options.include_canvas: per-step canvas events
  std::vector<std::string>
      stop;  // stop strings: the answer ends before the first (server/answer_text.h)
  engine::RequestOptions options;  // prompt, prefix_len, sampler (stop ids filled), cache
};

// Parses and validates a /v1/completions (chat=false) or /v1/chat/completions body. Throws
// ApiException (4xx) for anything the engine must not see, and for every field it does not act
// on, unless the field changes nothing (docs/serving.md, "OpenAI fields": each field's rule).
ParsedRequest ParseGenerationRequest(std::string_view body, bool chat,
                                     const engine::LoadedModel& lm, const ServerLimits& limits);

}  // namespace bicache::server
