// Request fuzzing: a /v1/completions or /v1/chat/completions body through the server's parser and
// validator, with the golden tiny LLaDA model. Input: u8 selector (bit 0: chat; bits 1-2: one of
// four limit settings), then the body. A rejected body must be a 4xx whose OpenAI error body
// serialises; an accepted one must respect every limit and the model's context.
#include <nlohmann/json.hpp>

#include "fixtures.h"
#include "server/api_request.h"
#include "targets.h"
#include "util/error.h"

namespace bicache::fuzz {

void ApiRequest(Input in) {
  if (in.empty()) return;
  const bool chat = in[0] & 1;
  server::ServerLimits limits;
  switch ((in[0] >> 1) & 3) {
    case 1:
      limits.max_tokens_limit = 8;
      limits.default_max_tokens = 4;
      limits.max_steps = 4;
      break;
    case 2:
      limits.max_prompt_tokens = 16;
      break;
    case 3:
      limits.max_tokens_limit = 1;
      limits.default_max_tokens = 1;
      limits.max_steps = 1;
      break;
    default:
      break;
  }
  const std::string_view body(reinterpret_cast<const char*>(in.data() + 1), in.size() - 1);
  const engine::LoadedModel& lm = GoldenLlada();
  const model::ModelConfig& c = lm.model().config();
  server::ParsedRequest r;
  try {
    r = server::ParseGenerationRequest(body, chat, lm, limits);
  } catch (const server::ApiException& e) {
    const server::ApiError& err = e.error();
    BICACHE_FUZZ_CHECK(err.status >= 400 && err.status < 500,
                       "a bad request answered with a non-4xx status");
    BICACHE_FUZZ_CHECK(!err.message.empty(), "an API error without a message");
    // What SendError writes (invalid UTF-8 echoed from the body is replaced, not thrown).
    server::ErrorBody(err).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  } catch (const Error&) {
    return;  // the handler answers these 400 too (server/generation.cpp)
  }
  const engine::RequestOptions& o = r.options;
  const diffusion::SamplerConfig& s = o.sampler;
  const int64_t P = static_cast<int64_t>(o.prompt.size());
  BICACHE_FUZZ_CHECK(P > 0, "accepted an empty prompt");
  BICACHE_FUZZ_CHECK(limits.max_prompt_tokens == 0 || P <= limits.max_prompt_tokens,
                     "prompt over max_prompt_tokens");
  BICACHE_FUZZ_CHECK(s.gen_length >= 1 && s.gen_length <= limits.max_tokens_limit,
                     "max_tokens over the limit");
  BICACHE_FUZZ_CHECK(s.steps >= 1 && s.steps <= limits.max_steps, "steps over the limit");
  BICACHE_FUZZ_CHECK(P + s.gen_length <= c.context_length, "prompt + max_tokens over the context");
  BICACHE_FUZZ_CHECK(o.prefix_len <= P, "prefix longer than the prompt");
  for (int32_t id : o.prompt)
    BICACHE_FUZZ_CHECK(id >= 0 && id < c.n_vocab, "prompt id outside the vocabulary");
}

}  // namespace bicache::fuzz
