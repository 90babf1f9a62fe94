// The fuzz entry points (docs/hardening.md). Each takes arbitrary bytes, drives one input surface
// of the library, and returns normally for every input the library handles as documented: a
// result, or the typed error it promises (bicache::Error, server::ApiException). Anything else —
// another exception, a broken invariant, a sanitizer report — is a bug: invariants call Violation,
// which aborts so libFuzzer (and the regression test) see a crash.
//
// The same functions are linked into libFuzzer binaries (fuzz/fuzz_main.cpp) and into the gtest
// binary, which replays fuzz/corpus/<target>/ and fuzz/regressions/<target>/ on every build.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace bicache::fuzz {

using Input = std::span<const uint8_t>;

void GgufBytes(Input in);       // whole-file bytes -> GgufFile::FromBytes -> model, tokenizer
void GgufStructured(Input in);  // mutations of a valid in-memory model file (counts, lengths,
                                // types, offsets, shapes, config values) -> the same path
void TokenizerText(Input in);   // encode/decode of arbitrary bytes and ids, round trips
void ApiRequest(Input in);      // /v1/(chat/)completions body parsing and validation
void ChatFormat(Input in);      // chat formatting, template detection, ChatPrompt's split
void HttpRequest(Input in);     // the HTTP server's request reading (Beast's parser + our checks)

struct Target {
  const char* name;  // folder name under fuzz/corpus and fuzz/regressions
  void (*run)(Input);
};
inline constexpr Target kTargets[] = {
    {"gguf_bytes", GgufBytes},    {"gguf_structured", GgufStructured},
    {"tokenizer", TokenizerText}, {"api_request", ApiRequest},
    {"chat", ChatFormat},         {"http_request", HttpRequest},
};

// Aborts with a message: an invariant the library promises did not hold.
[[noreturn]] void Violation(const std::string& what);
#define BICACHE_FUZZ_CHECK(cond, what)             \
  do {                                             \
    if (!(cond)) ::bicache::fuzz::Violation(what); \
  } while (0)

}  // namespace bicache::fuzz
