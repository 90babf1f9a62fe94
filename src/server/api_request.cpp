#include "server/api_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/request_check.h"
#include "server/answer_text.h"
#include "server/api_fields.h"
#include "tokenizer/chat.h"
#include "util/error.h"
#include "util/field_error.h"

namespace bicache::server {
namespace {

using nlohmann::json;

// A client's value as quoted in an error message: short, and never a dump of a structure. The
// serializer recurses per nesting level, so dumping a body nested ~100k deep (well inside the body
// limit) overflowed the handler thread's stack (found by fuzz/api_request; the input is kept in
// fuzz/regressions/api_request/).
std::string Shown(const json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  std::string s = v.dump();
  if (s.size() > 80) {
    size_t cut = 77;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
    s = s.substr(0, cut) + "...";
  }
  return s;
}

const json* Field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;  // null = absent, as OpenAI treats it
  return &*it;
}

// Integer fields: JSON integers, or floats with an integral value (some clients send 5.0). Range
// checked here, before any cast, so no out-of-range value ever reaches an int.
int64_t GetInt(const json& body, const char* key, int64_t def, int64_t lo, int64_t hi) {
  const json* v = Field(body, key);
  if (!v) return def;
  double d;
  if (v->is_number_integer() || v->is_number_unsigned()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) {
      BadRequest("'" + std::string(key) + "' must be between " + std::to_string(lo) + " and " +
                     std::to_string(hi) + ", got " + Shown(*v),
                 key);
    }
    const int64_t i =
        v->is_number_unsigned() ? static_cast<int64_t>(v->get<uint64_t>()) : v->get<int64_t>();
    if (i < lo || i > hi) {
      BadRequest("'" + std::string(key) + "' must be between " + std::to_string(lo) + " and " +
                     std::to_string(hi) + ", got " + std::to_string(i),
                 key);
    }
    return i;
  }
  if (v->is_number_float() && std::isfinite(d = v->get<double>()) && d == std::floor(d)) {
    // `hi + 1.0` rather than `hi`: a 64-bit bound rounds up to a power of two as a double
    // (INT64_MAX to 2^63), which `d > hi` would let through and the cast below could not hold.
    if (d < static_cast<double>(lo) || d >= static_cast<double>(hi) + 1.0) {
      BadRequest("'" + std::string(key) + "' must be between " + std::to_string(lo) + " and " +
                     std::to_string(hi) + ", got " + Shown(*v),
                 key);
    }
    return static_cast<int64_t>(d);
  }
  BadRequest("'" + std::string(key) + "' must be an integer, got " + Shown(*v), key);
}

double GetNumber(const json& body, const char* key, double def) {
  const json* v = Field(body, key);
  if (!v) return def;
  if (!v->is_number())
    BadRequest("'" + std::string(key) + "' must be a number, got " + Shown(*v), key);
  const double d = v->get<double>();
  if (!std::isfinite(d)) BadRequest("'" + std::string(key) + "' must be finite", key);
  return d;
}

// A number field held as a float. The sampler's ranges have their bounds at 0, 1 and 2; a value on
// one side of a bound stays on that side after rounding to float (0.99999999999 is below 1, and
// 1e-46 above 0, though both round onto the bound), so validation judges the value that was sent.
// Magnitudes past the float range become the largest float.
float GetFloat(const json& body, const char* key, double def) {
  const double d = std::clamp(GetNumber(body, key, def), -double{std::numeric_limits<float>::max()},
                              double{std::numeric_limits<float>::max()});
  float f = static_cast<float>(d);
  for (const float bound : {0.0f, 1.0f, 2.0f}) {
    if (d < bound && f >= bound) f = std::nextafter(bound, -std::numeric_limits<float>::infinity());
    if (d > bound && f <= bound) f = std::nextafter(bound, std::numeric_limits<float>::infinity());
  }
  return f;
}

bool GetBool(const json& body, const char* key, bool def) {
  const json* v = Field(body, key);
  if (!v) return def;
  if (!v->is_boolean())
    BadRequest("'" + std::string(key) + "' must be a boolean, got " + Shown(*v), key);
  return v->get<bool>();
}

std::string GetString(const json& body, const char* key, const std::string& def) {
  const json* v = Field(body, key);
  if (!v) return def;
  if (!v->is_string())
    BadRequest("'" + std::string(key) + "' must be a string, got " + Shown(*v), key);
  return v->get<std::string>();
}

// Token ids as JSON integers that fit an int32_t; whether they are in the vocabulary is the
// engine's check (engine::CheckRequest).
std::vector<int32_t> TokenArray(const json& arr, const char* key) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const json& t : arr) {
    if (!t.is_number_integer() && !t.is_number_unsigned()) {
      BadRequest("'" + std::string(key) +
                     "' must be a string or an array of token ids; got element " + Shown(t),
                 key);
    }
    // Compare as 64-bit before narrowing: a huge or negative id must not wrap into range.
    const bool fits =
        t.is_number_unsigned()
            ? t.get<uint64_t>() <= uint64_t{std::numeric_limits<int32_t>::max()}
            : (t.get<int64_t>() >= 0 && t.get<int64_t>() <= std::numeric_limits<int32_t>::max());
    if (!fits) {
      BadRequest("'" + std::string(key) + "' holds " + Shown(t) +
                     ", which is not a token id (0 .. " +
                     std::to_string(std::numeric_limits<int32_t>::max()) + ")",
                 key);
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

// Message content: a string, or OpenAI content parts [{"type":"text","text":...}].
std::string MessageContent(const json& msg, size_t i, const std::string& role) {
  const std::string param = "messages[" + std::to_string(i) + "].content";
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) {
    if (role == "assistant") return "";
    BadRequest("'" + param + "' is required", param);
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string text;
    for (const json& part : *it) {
      if (!part.is_object() || part.value("type", json()) != "text" || !part.contains("text") ||
          !part["text"].is_string()) {
        BadRequest("'" + param + "' parts must be {\"type\": \"text\", \"text\": string}", param);
      }
      text += part["text"].get<std::string>();
    }
    return text;
  }
  BadRequest("'" + param + "' must be a string or an array of text parts, got " + Shown(*it),
             param);
}

engine::Prompt ChatPromptFrom(const json& body, const engine::LoadedModel& lm) {
  const json* msgs = Field(body, "messages");
  if (!msgs) BadRequest("'messages' is required", "messages");
  if (!msgs->is_array()) BadRequest("'messages' must be an array of message objects", "messages");
  if (msgs->empty()) BadRequest("'messages' must not be empty", "messages");
  std::vector<tokenizer::ChatMessage> out;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const json& m = (*msgs)[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) BadRequest("'" + p + "' must be an object, got " + Shown(m), p);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      BadRequest("'" + p + ".role' must be a string", p + ".role");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system message
    if (r != "system" && r != "user" && r != "assistant") {
      BadRequest("'" + p + ".role' must be system, developer, user or assistant, got '" + r + "'",
                 p + ".role");
    }
    out.push_back({r, MessageContent(m, i, r)});
  }
  try {
    return lm.ChatPrompt(out);  // system + earlier turns become the shared prefix
  } catch (const Error& e) {
    BadRequest(e.what(), "messages");
  }
}

engine::Prompt CompletionPromptFrom(const json& body, const engine::LoadedModel& lm) {
  const json* p = Field(body, "prompt");
  if (!p) BadRequest("'prompt' is required", "prompt");
  const std::string prefix = GetString(body, "prefix", "");
  const json* text = p;
  if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) text = &(*p)[0];  // ["text"]
  engine::Prompt out;
  if (text->is_string()) {
    if (text->get_ref<const std::string&>().empty())
      BadRequest("'prompt' must not be empty", "prompt");
    out = lm.PlainPrompt(prefix, text->get<std::string>());
  } else if (p->is_array()) {
    if (p->empty()) BadRequest("'prompt' must not be empty", "prompt");
    if ((*p)[0].is_string() || (*p)[0].is_array()) {
      BadRequest("batched prompts are not supported: send one prompt per request", "prompt");
    }
    out.tokens = prefix.empty() ? std::vector<int32_t>() : lm.tokenizer().Encode(prefix);
    out.prefix_len = prefix.empty() ? -1 : static_cast<int>(out.tokens.size());
    const std::vector<int32_t> ids = TokenArray(*p, "prompt");
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
  } else {
    BadRequest("'prompt' must be a string or an array of token ids, got " + Shown(*p), "prompt");
  }
  if (out.tokens.empty()) BadRequest("'prompt' must not be empty", "prompt");
  return out;
}

// `stop`: a string or an array of at most kMaxStops non-empty strings ([] and null: none).
std::vector<std::string> StopStrings(const json& body) {
  const json* v = Field(body, "stop");
  if (!v) return {};
  if (!v->is_string() && !v->is_array()) {
    BadRequest("'stop' must be a string or an array of strings, got " + Shown(*v), "stop");
  }
  const json list = v->is_string() ? json::array({*v}) : *v;
  if (list.size() > kMaxStops) {
    BadRequest("'stop' takes at most " + std::to_string(kMaxStops) + " strings, got " +
                   std::to_string(list.size()),
               "stop");
  }
  std::vector<std::string> out;
  for (const json& s : list) {
    if (!s.is_string()) BadRequest("'stop' strings must be strings, got " + Shown(s), "stop");
    const std::string& text = s.get_ref<const std::string&>();
    if (text.empty()) BadRequest("'stop' strings must not be empty", "stop");
    if (text.size() > kMaxStopBytes) {
      BadRequest("'stop' strings must be at most " + std::to_string(kMaxStopBytes) +
                     " bytes, got one of " + std::to_string(text.size()),
                 "stop");
    }
    out.push_back(text);
  }
  return out;
}

// `stream_options`: include_usage (OpenAI's) and include_canvas (ours: the denoising canvas as
// `event: bicache.canvas` frames, docs/serving.md); both only with "stream": true, as OpenAI has
// it.
void ReadStreamOptions(const json& so, ParsedRequest* r) {
  if (!so.is_object()) BadRequest("'stream_options' must be an object", "stream_options");
  for (const auto& [key, value] : so.items()) {
    if (key != "include_usage" && key != "include_canvas") {
      BadRequest("'stream_options." + key +
                     "' is not supported (stream_options takes include_usage and include_canvas)",
                 "stream_options." + key);
    }
  }
  r->include_usage = GetBool(so, "include_usage", false);
  r->include_canvas = GetBool(so, "include_canvas", false);
  if ((r->include_usage || r->include_canvas) && !r->stream) {
    BadRequest("'stream_options' is only allowed when 'stream' is true", "stream_options");
  }
}

// An engine FieldError in the API's words: fields as this request spells them, the first one
// the error's `param`, and a value quoted as the client sent it (the sampler checked the float it
// holds: 1.0000001 rounds to 1, 1e308 was clamped).
[[noreturn]] void EngineError(const FieldError& e, const json& body, const FieldNamer& api_name) {
  const std::string param = e.field().empty() ? "" : api_name(e.field());
  std::string msg = e.Render(api_name);
  if (const json* sent = param.empty() ? nullptr : Field(body, param.c_str())) {
    const size_t at = msg.rfind("(got ");
    const size_t end = at == std::string::npos ? at : msg.find(')', at);
    if (end != std::string::npos) msg.replace(at, end - at + 1, "(got " + Shown(*sent) + ")");
  }
  BadRequest(msg, param, e.code());
}

// The sampling fields with the server's defaults and caps (max_tokens_limit, max_steps). What a
// value must be beyond its JSON type is the engine's check (engine::CheckRequest, which throws
// FieldErrors here too).
void ReadSampler(const json& body, const engine::LoadedModel& lm, const ServerLimits& limits, int P,
                 const char* gen_key, diffusion::SamplerConfig* out) {
  diffusion::SamplerConfig& s = *out;
  const model::ModelConfig& mc = lm.model().config();
  constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();
  // The default canvas fits what the context leaves (a prompt that fills it is the engine's error
  // to word); a block-diffusion model generates whole blocks of its own (sub-)block length.
  int64_t def = std::min<int64_t>(
      {limits.default_max_tokens, limits.max_tokens_limit, std::max(mc.context_length - P, 1)});
  const int unit = mc.denoise_block();  // 0: a bidirectional model
  if (unit > 0 && def >= unit) def = def / unit * unit;
  s.gen_length = static_cast<int>(GetInt(body, gen_key, def, 1, limits.max_tokens_limit));
  s.block_length =
      engine::ModelBlockLength(mc, static_cast<int>(GetInt(body, "block_length", 0, 1, kIntMax)));
  if (s.block_length == 0) s.block_length = s.gen_length;  // one block
  const int blocks = std::max(s.gen_length / s.block_length, 1);
  // Default steps: one per token (the LLaDA reference), capped by the server, kept a multiple of
  // the block count so the schedule is valid. Every block needs a step, so more blocks than
  // the server's max_steps allows cannot run within it.
  if (blocks > limits.max_steps) {
    BadRequest("'block_length' " + std::to_string(s.block_length) + " splits the " +
                   std::to_string(s.gen_length) + " tokens into " + std::to_string(blocks) +
                   " blocks, each needing a denoising step, but this server runs at most " +
                   std::to_string(limits.max_steps) +
                   " steps per request: use a longer block_length",
               "block_length");
  }
  const int def_steps =
      std::max(blocks, std::min(s.gen_length, limits.max_steps) / blocks * blocks);
  s.steps = static_cast<int>(GetInt(body, "steps", def_steps, 1, limits.max_steps));
  s.algorithm = diffusion::ParseAlgorithm(GetString(body, "algorithm", "low_confidence"));
  s.temperature = GetFloat(body, "temperature", 0);
  s.top_p = GetFloat(body, "top_p", 1);
  s.top_k = static_cast<int>(GetInt(body, "top_k", 0, 0, kIntMax));
  s.threshold = GetFloat(body, "threshold", 0);
  s.alg_temp = GetFloat(body, "alg_temp", 0);
  s.eps = GetFloat(body, "eps", 1e-3);
  s.cfg_scale = GetFloat(body, "cfg", 0);
  s.seed = static_cast<uint64_t>(GetInt(body, "seed", 0, 0, std::numeric_limits<int64_t>::max()));
  s.mask_id = mc.mask_token_id;
  s.stop_ids = lm.stop_ids();
}

engine::CacheMode ReadCache(const json& body, const ServerLimits& limits) {
  const json* c = Field(body, "cache");
  if (!c) return limits.default_cache;
  if (!c->is_string()) BadRequest("'cache' must be a string, got " + Shown(*c), "cache");
  try {
    return engine::ParseCacheMode(c->get<std::string>());
  } catch (const Error& e) {
    BadRequest(std::string("'cache': ") + e.what(), "cache");
  }
}

}  // namespace

json ErrorBody(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

std::string ErrorJson(int status, const std::string& message, const std::string& code) {
  ApiError e;
  e.status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.message = message;
  e.code = code;
  return ErrorBody(e).dump(-1, ' ', false, json::error_handler_t::replace);
}

void BadRequest(const std::string& message, const std::string& param, const std::string& code) {
  ApiError e;
  e.message = message;
  e.param = param;
  e.code = code;
  throw ApiException(std::move(e));
}

ParsedRequest ParseGenerationRequest(std::string_view text, bool chat,
                                     const engine::LoadedModel& lm, const ServerLimits& limits) {
  json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) BadRequest("the request body is not valid JSON");
  if (!body.is_object())
    BadRequest("the request body must be a JSON object, got " + std::string(body.type_name()));
  CheckFields(body, chat);
  GetString(body, "model",
            "");  // any id is accepted (one model per server), but it must be a string
  if (const int64_t n = GetInt(body, "n", 1, std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max());
      n != 1) {
    BadRequest(
        "'n' must be 1: this server returns one choice per request (send n requests for n "
        "answers), got " +
            std::to_string(n),
        "n");
  }

  ParsedRequest r;
  r.chat = chat;
  r.stream = GetBool(body, "stream", false);
  r.stop = StopStrings(body);
  if (const json* so = Field(body, "stream_options")) ReadStreamOptions(*so, &r);
  const engine::Prompt prompt = chat ? ChatPromptFrom(body, lm) : CompletionPromptFrom(body, lm);
  const int P = static_cast<int>(prompt.tokens.size());
  if (limits.max_prompt_tokens > 0 && P > limits.max_prompt_tokens) {
    BadRequest("the prompt has " + std::to_string(P) + " tokens, more than this server accepts (" +
                   std::to_string(limits.max_prompt_tokens) + ")",
               chat ? "messages" : "prompt", "prompt_too_long");
  }
  // OpenAI: max_completion_tokens replaces the deprecated max_tokens, so it wins when both are
  // sent.
  const char* gen_key =
      Field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  // Engine field names as this request spells them: the canvas length is the key it came in, the
  // prompt of a chat its messages.
  const FieldNamer api_name = [gen_key, chat](std::string_view field) {
    if (field == "gen_length") return std::string(gen_key);
    if (field == "prompt" && chat) return std::string("messages");
    return std::string(field);
  };
  r.options.prompt = prompt.tokens;
  r.options.prefix_len = prompt.prefix_len;
  try {
    ReadSampler(body, lm, limits, P, gen_key, &r.options.sampler);
    r.options.cache = ReadCache(body, limits);
    r.options.refresh_interval = static_cast<int>(GetInt(
        body, "refresh", std::min(limits.default_refresh, limits.max_steps), 0, limits.max_steps));
    // The engine's acceptance check (Engine::Start runs it too), here so nothing it would refuse
    // is queued: every semantic rule (ranges, context, vocabulary, blocks, combinations) is
    // there, once.
    engine::CheckRequest(r.options, lm.model().config());
  } catch (const FieldError& e) {
    EngineError(e, body, api_name);
  } catch (const Error& e) {  // none is expected; still the client's request, never a 500
    BadRequest(e.what());
  }
  return r;
}

}  // namespace bicache::server
