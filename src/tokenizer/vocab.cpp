#include "tokenizer/vocab.h"

#include <algorithm>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace bicache::tokenizer {
namespace {

[[noreturn]] void Bad(const std::string& key, const std::string& what) {
  throw Error(ErrorKind::kModel, key + ": " + what);
}

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

void CheckSpecialId(const char* key, int32_t id, int32_t n) {
  if (id < -1 || id >= n) {
    Bad(std::string("tokenizer.ggml.") + key, "token id " + std::to_string(id) +
                                                  " is out of range (vocabulary has " +
                                                  std::to_string(n) + " tokens)");
  }
}

}  // namespace

Vocab::Vocab(const TokenizerData& data) {
  const std::string kTokens = "tokenizer.ggml.tokens";
  const std::string kTypes = "tokenizer.ggml.token_type";
  const std::string kMerges = "tokenizer.ggml.merges";
  if (data.tokens.empty()) Bad(kTokens, "vocabulary is empty");
  if (data.tokens.size() > static_cast<size_t>(INT32_MAX)) Bad(kTokens, "too many tokens");
  const int32_t n = static_cast<int32_t>(data.tokens.size());
  if (!data.token_type.empty() && data.token_type.size() != data.tokens.size()) {
    Bad(kTypes, "has " + std::to_string(data.token_type.size()) + " entries but " + kTokens +
                    " has " + std::to_string(n));
  }

  text_ = data.tokens;
  type_.resize(n, TokenType::kNormal);
  bytes_.resize(n);
  index_.reserve(static_cast<size_t>(n) * 2);
  for (int32_t i = 0; i < n; ++i) {
    const std::string& t = text_[i];
    if (t.empty()) Bad(kTokens, "token " + std::to_string(i) + " is an empty string");
    if (!IsValidUtf8(t)) Bad(kTokens, "token " + std::to_string(i) + " is not valid UTF-8");
    if (!data.token_type.empty()) {
      int32_t ty = data.token_type[i];
      if (ty < 0 || ty > 6) {
        Bad(kTypes, "token " + std::to_string(i) + " has unknown type " + std::to_string(ty));
      }
      type_[i] = static_cast<TokenType>(ty);
    }
    // Control/user-defined/unknown/unused tokens are stored as plain text, not byte-mapped.
    TokenType ty = type_[i];
    bool plain = ty == TokenType::kControl || ty == TokenType::kUserDefined ||
                 ty == TokenType::kUnknown || ty == TokenType::kUnused;
    if (plain) {
      bytes_[i] = t;
    } else {
      VocabTextToBytes(t, &bytes_[i]);  // validity checked above
    }
    index_.emplace(t, i);  // keeps the first id of a duplicated string
  }

  CheckSpecialId("bos_token_id", data.bos, n);
  CheckSpecialId("eos_token_id", data.eos, n);
  CheckSpecialId("eot_token_id", data.eot, n);
  CheckSpecialId("padding_token_id", data.pad, n);
  CheckSpecialId("mask_token_id", data.mask, n);

  byte_token_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    auto it = index_.find(BytesToVocabText(std::string(1, static_cast<char>(b))));
    if (it != index_.end() && type_[it->second] != TokenType::kControl) {
      byte_token_[b] = it->second;
    }
  }

  if (data.merges.size() > static_cast<size_t>(INT32_MAX)) Bad(kMerges, "too many merges");
  merges_.reserve(data.merges.size() * 2);
  for (size_t r = 0; r < data.merges.size(); ++r) {
    const std::string& m = data.merges[r];
    std::string where = "merge " + std::to_string(r) + " '" + m + "'";
    // Byte-level token text never contains a raw space, so the separator is the only one; start
    // at 1 so that a (non-byte-level) left part " " would still split correctly.
    size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size() || m.find(' ', sp + 1) != std::string::npos) {
      Bad(kMerges, where + " is not two tokens separated by one space");
    }
    std::string left = m.substr(0, sp), right = m.substr(sp + 1);
    auto l = index_.find(left), rr = index_.find(right), res = index_.find(left + right);
    if (l == index_.end()) Bad(kMerges, where + ": left part is not a token");
    if (rr == index_.end()) Bad(kMerges, where + ": right part is not a token");
    if (res == index_.end()) Bad(kMerges, where + ": the merged string is not a token");
    // A repeated pair keeps its first (lowest) rank.
    merges_.emplace(PairKey(l->second, rr->second),
                    MergeInfo{static_cast<int32_t>(r), res->second});
  }
  n_merges_ = static_cast<int32_t>(data.merges.size());

  for (int32_t i = 0; i < n; ++i) {
    if (IsSpecial(i)) specials_by_byte_[static_cast<uint8_t>(text_[i][0])].push_back(i);
  }
  for (auto& list : specials_by_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](int32_t a, int32_t b) { return text_[a].size() > text_[b].size(); });
  }
}

const std::string& Vocab::Text(int32_t id) const {
  if (!valid(id)) {
    throw Error(ErrorKind::kInvalidArgument, "token id " + std::to_string(id) +
                                                 " is out of range (vocabulary has " +
                                                 std::to_string(size()) + " tokens)");
  }
  return text_[id];
}

TokenType Vocab::Type(int32_t id) const {
  Text(id);  // range check
  return type_[id];
}

const std::string& Vocab::Bytes(int32_t id) const {
  Text(id);
  return bytes_[id];
}

bool Vocab::IsSpecial(int32_t id) const {
  TokenType t = Type(id);
  return t == TokenType::kControl || t == TokenType::kUserDefined;
}

std::optional<int32_t> Vocab::Find(std::string_view text) const {
  auto it = index_.find(std::string(text));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

bool Vocab::FindMerge(int32_t left, int32_t right, int32_t* rank, int32_t* result) const {
  auto it = merges_.find(PairKey(left, right));
  if (it == merges_.end()) return false;
  *rank = it->second.rank;
  *result = it->second.result;
  return true;
}

}  // namespace bicache::tokenizer
