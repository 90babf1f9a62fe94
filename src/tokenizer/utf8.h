// UTF-8 helpers, including the streaming decoder the server uses to turn token bytes into text.
//
// A byte-level BPE token can end in the middle of a multi-byte character, and a model can emit
// byte sequences that are not UTF-8 at all. Streaming clients need valid UTF-8 in every chunk, so
// the decoder holds back an incomplete trailing sequence until the next token completes it, and
// replaces ill-formed bytes with U+FFFD (one per "maximal subpart", the Unicode recommended
// practice that Python's errors="replace" also follows).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace bicache::tokenizer {

// Decodes one well-formed UTF-8 character of `s` at `pos` (rejecting overlongs, surrogates and
// values above U+10FFFF). Returns its length in bytes, or 0 if the bytes there are ill-formed or
// truncated.
size_t DecodeUtf8Char(std::string_view s, size_t pos, uint32_t* cp);

bool IsValidUtf8(std::string_view s);

class Utf8StreamDecoder {
 public:
  // Feeds more bytes; returns the text that is now complete (always valid UTF-8).
  std::string Push(std::string_view bytes);
  // End of stream: a held-back incomplete sequence becomes one U+FFFD.
  std::string Flush();
  // True while an incomplete sequence is held back.
  bool has_pending() const { return !pending_.empty(); }

 private:
  std::string pending_;  // at most 3 bytes: a valid but unfinished sequence
};

// Whole-string convenience: invalid bytes become U+FFFD.
std::string SanitizeUtf8(std::string_view bytes);

}  // namespace bicache::tokenizer
