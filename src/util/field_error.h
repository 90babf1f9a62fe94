// An invalid-argument error whose message names the request fields it is about.
//
// The library has two front ends that spell the same setting differently: the CLI says
// `--gen-length`, the HTTP API says `max_tokens`. A FieldError holds its message as a template in
// which every field is written `{field}` (a stable identifier such as "steps" or "gen_length"), so
// each front end renders the names its own way (cli/render_error.h, server/api_request.cpp)
// instead of translating another front end's words back. what() shows the bare identifiers, for
// any caller that does not render.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "util/error.h"

namespace bicache {

// Spells a field identifier for one front end ("gen_length" -> "--gen-length" or "max_tokens").
using FieldNamer = std::function<std::string(std::string_view field)>;

// Replaces every `{field}` in `text` with namer(field); other text, braces included, is kept.
// `first`, when given, receives the first field mentioned ("" when none is).
std::string RenderFields(std::string_view text, const FieldNamer& namer,
                         std::string* first = nullptr);

class FieldError : public Error {
 public:
  // `text` names fields as `{field}`. `code`: a stable machine-readable reason for front ends
  // that report one (the HTTP API's "code", e.g. "context_length_exceeded"); "" when none.
  FieldError(ErrorKind kind, std::string text, std::string code = "");

  // The message with each field spelled by `namer`.
  std::string Render(const FieldNamer& namer) const { return RenderFields(text_, namer); }
  // The first field the message mentions: the one the error is about.
  std::string field() const;
  const std::string& code() const { return code_; }

 private:
  std::string text_;
  std::string code_;
};

}  // namespace bicache
