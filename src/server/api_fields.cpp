#include "server/api_fields.h"

#include <string>
#include <string_view>

#include "server/api_request.h"

namespace bicache::server {
namespace {

using nlohmann::json;

enum class Scope { kBoth, kCompletions, kChat };
enum class Rule {
  kRead,         // the parser acts on it
  kHarmless,     // accepted and ignored: it cannot change the answer
  kUnsupported,  // 400 unless its value is a no-op (`noop`)
};

bool IsFalse(const json& v) {
  return v.is_boolean() && !v.get<bool>();
}
bool IsZero(const json& v) {
  return v.is_number() && v.get<double>() == 0;
}
bool IsOne(const json& v) {
  return v.is_number() && v.get<double>() == 1;
}
bool IsEmpty(const json& v) {  // json::empty() is false for every string, "" included
  if (v.is_string()) return v.get_ref<const std::string&>().empty();
  return (v.is_array() || v.is_object()) && v.empty();
}
bool IsNoToolChoice(const json& v) {
  return v == "none" || v == "auto";  // without tools, both mean: answer in text
}
bool IsTextFormat(const json& v) {
  return v.is_object() && v.size() == 1 && v.value("type", json()) == "text";
}
bool IsTextOnly(const json& v) {
  return v == json::array({"text"});
}
bool Never(const json&) {
  return false;
}

struct Field {
  const char* name;
  Scope scope;
  Rule rule;
  bool (*noop)(const json&) = nullptr;  // kUnsupported: the value that asks for nothing
  const char* why = "";                 // kUnsupported: the rest of the message
};

// clang-format off
constexpr Field kFields[] = {
    // Acted on. OpenAI's names first, then this server's own (docs/serving.md, "Body fields").
    {"model", Scope::kBoth, Rule::kRead},
    {"prompt", Scope::kCompletions, Rule::kRead},
    {"messages", Scope::kChat, Rule::kRead},
    {"max_tokens", Scope::kBoth, Rule::kRead},
    {"max_completion_tokens", Scope::kBoth, Rule::kRead},
    {"temperature", Scope::kBoth, Rule::kRead},
    {"top_p", Scope::kBoth, Rule::kRead},
    {"seed", Scope::kBoth, Rule::kRead},
    {"stop", Scope::kBoth, Rule::kRead},
    {"n", Scope::kBoth, Rule::kRead},
    {"stream", Scope::kBoth, Rule::kRead},
    {"stream_options", Scope::kBoth, Rule::kRead},
    {"prefix", Scope::kCompletions, Rule::kRead},
    {"steps", Scope::kBoth, Rule::kRead},
    {"block_length", Scope::kBoth, Rule::kRead},
    {"algorithm", Scope::kBoth, Rule::kRead},
    {"top_k", Scope::kBoth, Rule::kRead},
    {"threshold", Scope::kBoth, Rule::kRead},
    {"alg_temp", Scope::kBoth, Rule::kRead},
    {"eps", Scope::kBoth, Rule::kRead},
    {"cfg", Scope::kBoth, Rule::kRead},
    {"cache", Scope::kBoth, Rule::kRead},
    {"refresh", Scope::kBoth, Rule::kRead},
    // Harmless: labels, storage and routing hints that cannot change the answer.
    {"user", Scope::kBoth, Rule::kHarmless},
    {"metadata", Scope::kChat, Rule::kHarmless},
    {"store", Scope::kChat, Rule::kHarmless},
    {"service_tier", Scope::kChat, Rule::kHarmless},
    {"safety_identifier", Scope::kChat, Rule::kHarmless},
    {"prompt_cache_key", Scope::kChat, Rule::kHarmless},
    {"prediction", Scope::kChat, Rule::kHarmless},  // a latency hint: the answer is the same
    {"parallel_tool_calls", Scope::kChat, Rule::kHarmless},  // no tools can be given
    // Not supported: refused unless the value asks for nothing.
    {"presence_penalty", Scope::kBoth, Rule::kUnsupported, IsZero,
     "a diffusion model commits its canvas in parallel, with no token history to penalise; send 0 "
     "or leave it out"},
    {"frequency_penalty", Scope::kBoth, Rule::kUnsupported, IsZero,
     "a diffusion model commits its canvas in parallel, with no token history to penalise; send 0 "
     "or leave it out"},
    {"logit_bias", Scope::kBoth, Rule::kUnsupported, IsEmpty,
     "the sampler takes no per-token bias; send {} or leave it out"},
    {"logprobs", Scope::kCompletions, Rule::kUnsupported, Never,
     "this server returns no log probabilities; leave it out"},
    {"logprobs", Scope::kChat, Rule::kUnsupported, IsFalse,
     "this server returns no log probabilities; send false or leave it out"},
    {"top_logprobs", Scope::kChat, Rule::kUnsupported, IsZero,
     "this server returns no log probabilities; send 0 or leave it out"},
    {"echo", Scope::kCompletions, Rule::kUnsupported, IsFalse,
     "the prompt is not repeated in the answer; send false or leave it out"},
    {"suffix", Scope::kCompletions, Rule::kUnsupported, IsEmpty,
     "text after the completion (insertion) is not supported; send \"\" or leave it out"},
    {"best_of", Scope::kCompletions, Rule::kUnsupported, IsOne,
     "this server generates one completion per request; send 1 or leave it out"},
    {"tools", Scope::kChat, Rule::kUnsupported, IsEmpty,
     "this server has no tool calling; send [] or leave it out"},
    {"functions", Scope::kChat, Rule::kUnsupported, IsEmpty,
     "this server has no function calling; send [] or leave it out"},
    {"tool_choice", Scope::kChat, Rule::kUnsupported, IsNoToolChoice,
     "this server has no tool calling; send \"none\" or leave it out"},
    {"function_call", Scope::kChat, Rule::kUnsupported, IsNoToolChoice,
     "this server has no function calling; send \"none\" or leave it out"},
    {"response_format", Scope::kChat, Rule::kUnsupported, IsTextFormat,
     "the answer cannot be constrained to JSON; send {\"type\": \"text\"} or leave it out"},
    {"modalities", Scope::kChat, Rule::kUnsupported, IsTextOnly,
     "this server answers in text only; send [\"text\"] or leave it out"},
    {"audio", Scope::kChat, Rule::kUnsupported, Never,
     "this server answers in text only; leave it out"},
    {"reasoning_effort", Scope::kChat, Rule::kUnsupported, Never,
     "the model has no reasoning mode; leave it out"},
    {"verbosity", Scope::kChat, Rule::kUnsupported, Never,
     "the answer's length is set by max_tokens only; leave it out"},
    {"web_search_options", Scope::kChat, Rule::kUnsupported, Never,
     "this server has no web search; leave it out"},
};
// clang-format on

bool InScope(Scope s, bool chat) {
  return s == Scope::kBoth || (s == Scope::kChat) == chat;
}

const char* Endpoint(bool chat) {
  return chat ? "/v1/chat/completions" : "/v1/completions";
}

void CheckOne(const std::string& key, const json& value, bool chat) {
  const Field* other = nullptr;  // a row for the other endpoint only
  for (const Field& f : kFields) {
    if (key != f.name) continue;
    if (!InScope(f.scope, chat)) {
      other = &f;
      continue;
    }
    if (f.rule == Rule::kUnsupported && !f.noop(value))
      BadRequest("'" + key + "' is not supported: " + f.why, key);
    return;
  }
  if (other) {
    BadRequest("'" + key + "' is a " + Endpoint(!chat) + " field; " + Endpoint(chat) + " takes " +
                   (chat ? "'messages'" : "'prompt'") + " and does not accept it",
               key);
  }
  // OpenAI's own words for an unknown field, with the field quoted.
  BadRequest("Unrecognized request argument supplied: '" + key.substr(0, 80) +
                 "' (docs/serving.md lists the fields this server takes)",
             key.substr(0, 80));
}

}  // namespace

void CheckFields(const json& body, bool chat) {
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;  // null = absent, as OpenAI treats it
    CheckOne(key, value, chat);
  }
}

}  // namespace bicache::server
