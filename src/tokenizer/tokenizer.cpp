#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <queue>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace bicache::tokenizer {

Tokenizer::Tokenizer(const TokenizerData& data)
    : vocab_(data),
      pretok_(data.pre),
      pre_name_(data.pre),
      bos_(data.bos),
      eos_(data.eos),
      eot_(data.eot),
      pad_(data.pad),
      mask_(data.mask),
      chat_template_(data.chat_template) {}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool parse_special) const {
  if (!parse_special) {
    std::vector<int32_t> out;
    EncodePlain(text, &out);
    return out;
  }
  const ByteRange all{0, text.size()};
  return EncodeWithSpecialRanges(text, std::span<const ByteRange>(&all, 1));
}

std::vector<int32_t> Tokenizer::EncodeWithSpecialRanges(
    std::string_view text, std::span<const ByteRange> special_ranges) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  // Scan the ranges for special-token strings; cost O(range bytes * specials sharing the first
  // byte). Text outside the ranges is skipped over and joins the surrounding plain run.
  size_t plain_start = 0;
  for (const ByteRange& r : special_ranges) {
    const size_t end = std::min(r.end, text.size());
    size_t pos = std::max(r.begin, plain_start);
    while (pos < end) {
      int32_t hit = -1;
      for (int32_t id : vocab_.SpecialsStartingWith(static_cast<uint8_t>(text[pos]))) {
        const std::string& s = vocab_.Text(id);
        if (end - pos >= s.size() && std::memcmp(text.data() + pos, s.data(), s.size()) == 0) {
          hit = id;  // list is longest-first, so the first hit is the longest
          break;
        }
      }
      if (hit < 0) {
        ++pos;
        continue;
      }
      EncodePlain(text.substr(plain_start, pos - plain_start), &out);
      out.push_back(hit);
      pos += vocab_.Text(hit).size();
      plain_start = pos;
    }
  }
  EncodePlain(text.substr(plain_start), &out);
  return out;
}

void Tokenizer::EncodePlain(std::string_view text, std::vector<int32_t>* out) const {
  if (text.empty()) return;
  for (std::string_view piece : pretok_.Split(text)) EncodePiece(piece, out);
}

void Tokenizer::EncodePiece(std::string_view piece, std::vector<int32_t>* out) const {
  if (pretok_.ignore_merges()) {
    // LLaMA-3 vocabularies (tiktoken-derived) contain whole pieces whose merge path may not
    // reproduce them; a direct hit wins, as in the reference implementations.
    if (auto id = vocab_.Find(BytesToVocabText(piece)); id && !vocab_.IsSpecial(*id)) {
      out->push_back(*id);
      return;
    }
  }
  // Symbols form a doubly linked list over the piece's bytes.
  struct Sym {
    int32_t id;
    int32_t prev, next;
  };
  std::vector<Sym> syms(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    uint8_t b = static_cast<uint8_t>(piece[i]);
    int32_t id = vocab_.ByteToken(b);
    if (id < 0) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02X", b);
      throw Error(ErrorKind::kModel,
                  std::string("tokenizer.ggml.tokens: the vocabulary has no token for byte ") +
                      hex + ", needed to encode this text");
    }
    syms[i] = {id, static_cast<int32_t>(i) - 1,
               i + 1 < piece.size() ? static_cast<int32_t>(i) + 1 : -1};
  }
  struct Cand {
    int32_t rank, left, right, left_id, right_id, result;
    bool operator>(const Cand& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;  // lowest rank, then leftmost
    }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    int32_t rank, result;
    if (vocab_.FindMerge(syms[l].id, syms[r].id, &rank, &result)) {
      heap.push({rank, l, r, syms[l].id, syms[r].id, result});
    }
  };
  for (size_t i = 0; i + 1 < piece.size(); ++i) {
    consider(static_cast<int32_t>(i), static_cast<int32_t>(i) + 1);
  }
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& l = syms[c.left];
    // Stale if either side was merged away or changed since the candidate was pushed.
    if (l.id != c.left_id || l.next != c.right || syms[c.right].id != c.right_id) continue;
    Sym& r = syms[c.right];
    l.id = c.result;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.id = -1;  // dead
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int32_t i = 0; i >= 0 && !piece.empty(); i = syms[i].next) out->push_back(syms[i].id);
}

const std::string& Tokenizer::TokenBytes(int32_t id, bool skip_special) const {
  static const std::string kEmpty;
  TokenType t = vocab_.Type(id);  // range check
  if (skip_special &&
      (t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUnused)) {
    return kEmpty;
  }
  return vocab_.Bytes(id);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) out += TokenBytes(id, skip_special);
  return out;
}

std::string Tokenizer::DecodeText(std::span<const int32_t> ids, bool skip_special) const {
  return SanitizeUtf8(Decode(ids, skip_special));
}

}  // namespace bicache::tokenizer
