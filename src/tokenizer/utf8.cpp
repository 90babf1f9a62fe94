#include "tokenizer/utf8.h"

namespace bicache::tokenizer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// For a lead byte: total length and the allowed range of the *second* byte (later continuation
// bytes are always 80..BF). The narrowed second-byte ranges exclude overlongs (E0, F0),
// surrogates (ED) and values above U+10FFFF (F4). Returns 0 for a byte that cannot start one.
int LeadInfo(unsigned char b, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b == 0xE0) {
    *lo = 0xA0;
    return 3;
  }
  if (b >= 0xE1 && b <= 0xEC) return 3;
  if (b == 0xED) {
    *hi = 0x9F;
    return 3;
  }
  if (b >= 0xEE && b <= 0xEF) return 3;
  if (b == 0xF0) {
    *lo = 0x90;
    return 4;
  }
  if (b >= 0xF1 && b <= 0xF3) return 4;
  if (b == 0xF4) {
    *hi = 0x8F;
    return 4;
  }
  return 0;
}

// How many bytes (1..need) of the sequence starting at s[pos] are valid so far; `need` means
// complete. Fewer means either an invalid byte follows or the string ends early.
int ValidPrefix(std::string_view s, size_t pos, int need, unsigned char lo, unsigned char hi) {
  int n = 1;
  while (n < need && pos + n < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[pos + n]);
    unsigned char l = n == 1 ? lo : 0x80, h = n == 1 ? hi : 0xBF;
    if (c < l || c > h) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t DecodeUtf8Char(std::string_view s, size_t pos, uint32_t* cp) {
  if (pos >= s.size()) return 0;
  unsigned char b = static_cast<unsigned char>(s[pos]);
  unsigned char lo, hi;
  int need = LeadInfo(b, &lo, &hi);
  if (need == 0) return 0;
  if (need == 1) {
    *cp = b;
    return 1;
  }
  if (ValidPrefix(s, pos, need, lo, hi) != need) return 0;
  uint32_t v = b & (0x7F >> need);
  for (int k = 1; k < need; ++k) v = (v << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  *cp = v;
  return static_cast<size_t>(need);
}

bool IsValidUtf8(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t n = DecodeUtf8Char(s, i, &cp);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string Utf8StreamDecoder::Push(std::string_view bytes) {
  std::string buf = pending_;
  buf.append(bytes);
  pending_.clear();
  std::string out;
  out.reserve(buf.size());
  size_t i = 0;
  while (i < buf.size()) {
    unsigned char b = static_cast<unsigned char>(buf[i]);
    unsigned char lo, hi;
    int need = LeadInfo(b, &lo, &hi);
    if (need == 1) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    if (need == 0) {  // stray continuation byte or impossible lead byte
      out.append(kReplacement);
      ++i;
      continue;
    }
    int got = ValidPrefix(buf, i, need, lo, hi);
    if (got == need) {
      out.append(buf, i, static_cast<size_t>(need));
      i += static_cast<size_t>(need);
    } else if (i + static_cast<size_t>(got) == buf.size()) {
      pending_ = buf.substr(i);  // valid so far, just unfinished: wait for the next token
      break;
    } else {
      out.append(kReplacement);  // maximal subpart; resume at the offending byte
      i += static_cast<size_t>(got);
    }
  }
  return out;
}

std::string Utf8StreamDecoder::Flush() {
  if (pending_.empty()) return {};
  pending_.clear();
  return std::string(kReplacement);
}

std::string SanitizeUtf8(std::string_view bytes) {
  Utf8StreamDecoder d;
  std::string out = d.Push(bytes);
  out += d.Flush();
  return out;
}

}  // namespace bicache::tokenizer
