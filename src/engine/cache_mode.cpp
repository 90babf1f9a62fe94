#include "engine/cache_mode.h"

#include <charconv>

#include "util/error.h"

namespace bicache::engine {

std::string CacheMode::ToString() const {
  std::string s;
  switch (prefix) {
    case PrefixReuse::kNone:
      s = dual ? "" : "none";
      break;
    case PrefixReuse::kLlm:
      s = "llm";
      break;
    case PrefixReuse::kFixed:
      s = "fixed:" + std::to_string(fixed_depth);
      break;
    case PrefixReuse::kBicache:
      s = "bicache";
      break;
    case PrefixReuse::kExact:
      s = "prefix";
      break;
  }
  if (dual) s += s.empty() ? "dual" : "+dual";
  return s;
}

CacheMode ParseCacheMode(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Error(
        ErrorKind::kInvalidArgument,
        "cache mode '" + std::string(text) + "': " + why +
            " (valid: none, llm, fixed:B, bicache, prefix, dual, and X+dual such as bicache+dual)");
  };
  CacheMode mode;
  std::string_view rest = text;
  bool have_prefix = false;
  while (!rest.empty()) {
    const size_t plus = rest.find('+');
    std::string_view part = rest.substr(0, plus);
    rest = plus == std::string_view::npos ? std::string_view{} : rest.substr(plus + 1);
    if (plus != std::string_view::npos && rest.empty()) throw bad("trailing '+'");
    if (part == "dual") {
      if (mode.dual) throw bad("'dual' given twice");
      mode.dual = true;
      continue;
    }
    if (have_prefix) throw bad("more than one prefix mode");
    have_prefix = true;
    if (part == "none") {
      mode.prefix = PrefixReuse::kNone;
    } else if (part == "llm") {
      mode.prefix = PrefixReuse::kLlm;
    } else if (part == "bicache") {
      mode.prefix = PrefixReuse::kBicache;
    } else if (part == "prefix") {
      mode.prefix = PrefixReuse::kExact;
    } else if (part.starts_with("fixed:")) {
      std::string_view num = part.substr(6);
      int depth = -1;
      auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), depth);
      if (num.empty() || ec != std::errc() || p != num.data() + num.size() || depth < 0 ||
          depth > 4096) {
        throw bad("fixed:B needs a layer count B >= 0");
      }
      mode.prefix = PrefixReuse::kFixed;
      mode.fixed_depth = depth;
    } else {
      throw bad("unknown mode '" + std::string(part) + "'");
    }
  }
  if (!have_prefix && !mode.dual) throw bad("empty");
  return mode;
}

}  // namespace bicache::engine
