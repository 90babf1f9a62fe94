// Pre-tokenizer: splits text into the pieces that BPE merges never cross, using the regex that
// the model's tokenizer was trained with, selected by GGUF `tokenizer.ggml.pre`.
//
// Patterns are compiled with PCRE2 (UTF + UCP, so \s \p{L} \p{N} are Unicode-aware, JIT when
// available). Input that is not valid UTF-8 is allowed: ill-formed bytes never match and are
// returned as pieces of their own, so no byte of the input is ever dropped.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace bicache::tokenizer {

class PreTokenizer {
 public:
  // Throws Error(kUnsupported) naming `pre` if it is not a known pre-tokenizer.
  explicit PreTokenizer(std::string_view pre);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Canonical name of the chosen pattern: "gpt2", "gpt2-digits", "llama3", "qwen2" or
  // "bailingmoe".
  const std::string& kind() const { return kind_; }
  // LLaMA-3 vocabularies look a whole piece up before merging (llama.cpp `ignore_merges`).
  bool ignore_merges() const { return ignore_merges_; }
  // The PCRE2 pattern in use.
  const std::string& pattern() const { return pattern_; }

  // Pieces of `text` in order; their concatenation is `text`. Thread-safe (per-call match data).
  std::vector<std::string_view> Split(std::string_view text) const;

 private:
  struct Code;
  std::string kind_;
  std::string pattern_;
  bool ignore_merges_ = false;
  std::unique_ptr<Code> code_;
};

}  // namespace bicache::tokenizer
