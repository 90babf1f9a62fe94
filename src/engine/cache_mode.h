// Cache modes, selectable everywhere as `--cache MODE` / the API's `cache` field.
//
//   none          full recompute of every token in every layer at every step
//   llm           LLM-style prefix cache: prefix K/V from the prefix alone reused in EVERY layer
//                 (what vLLM/SGLang do; known to collapse a bidirectional DLM's accuracy)
//   fixed:B       reuse the prefix K/V in layers < B, recompute layers >= B (fixed:0 == none,
//                 fixed:L == llm)
//   bicache       reuse to the safe depth b(r) looked up in the depth table for the request's
//                 prefix ratio r
//   prefix        exact prefix reuse for block-diffusion models (sdar, fast-dllm-v2): the K/V of
//                 the whole blocks of a shared prefix, at every layer. On those models every
//                 prefix mode (llm, fixed:B, bicache) is this one; a bidirectional model refuses it
//   dual          Fast-dLLM dual cache inside a request: full forward at each block start, then
//                 only the current block is computed against cached K/V of everything else
//   X+dual        any prefix mode composed with the dual cache, e.g. bicache+dual
#pragma once

#include <string>
#include <string_view>

namespace bicache::engine {

enum class PrefixReuse { kNone, kLlm, kFixed, kBicache, kExact };

struct CacheMode {
  PrefixReuse prefix = PrefixReuse::kNone;
  int fixed_depth = 0;  // for kFixed
  bool dual = false;

  bool reuses_prefix() const { return prefix != PrefixReuse::kNone; }
  std::string ToString() const;
  bool operator==(const CacheMode&) const = default;
};

// Parses a mode name; throws Error(kInvalidArgument) naming the value and listing valid forms.
CacheMode ParseCacheMode(std::string_view text);

}  // namespace bicache::engine
