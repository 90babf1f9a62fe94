#include "util/field_error.h"

namespace bicache {
namespace {

bool IsFieldChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

std::string Bare(std::string_view field) {
  return std::string(field);
}

}  // namespace

std::string RenderFields(std::string_view text, const FieldNamer& namer, std::string* first) {
  std::string out;
  out.reserve(text.size());
  if (first) first->clear();
  bool seen = false;
  for (size_t i = 0; i < text.size();) {
    // Only `{identifier}` is a field reference, so messages may still quote other braces.
    size_t end = i + 1;
    if (text[i] == '{') {
      while (end < text.size() && IsFieldChar(text[end])) ++end;
    }
    if (text[i] == '{' && end > i + 1 && end < text.size() && text[end] == '}') {
      const std::string_view field = text.substr(i + 1, end - i - 1);
      if (first && !seen) *first = std::string(field);
      seen = true;
      out += namer(field);
      i = end + 1;
    } else {
      out += text[i++];
    }
  }
  return out;
}

FieldError::FieldError(ErrorKind kind, std::string text, std::string code)
    : Error(kind, RenderFields(text, Bare)), text_(std::move(text)), code_(std::move(code)) {}

std::string FieldError::field() const {
  std::string first;
  RenderFields(text_, Bare, &first);
  return first;
}

}  // namespace bicache
