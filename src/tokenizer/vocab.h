// Byte-level BPE vocabulary: token strings, types, merge ranks and special ids, validated once at
// construction so that encoding and decoding never index with an unchecked value.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bicache::tokenizer {

// GGUF `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Everything a tokenizer is built from; filled from GGUF metadata or directly by tests.
struct TokenizerData {
  std::vector<std::string> tokens;  // vocabulary text (byte-level: GPT-2 byte-to-unicode)
  std::vector<int32_t> token_type;  // empty = all normal; else one TokenType per token
  std::vector<std::string> merges;  // "left right", rank = index
  std::string pre = "default";      // pre-tokenizer name (tokenizer.ggml.pre)
  int32_t bos = -1, eos = -1, eot = -1, pad = -1, mask = -1;  // -1 = absent
  std::string chat_template;  // tokenizer.chat_template (may be empty)
};

class Vocab {
 public:
  // Validates `data` (not the pre-tokenizer name). Throws Error(kModel) naming the GGUF key.
  explicit Vocab(const TokenizerData& data);

  int32_t size() const { return static_cast<int32_t>(text_.size()); }
  bool valid(int32_t id) const { return id >= 0 && id < size(); }
  // These throw Error(kInvalidArgument) for an out-of-range id.
  const std::string& Text(int32_t id) const;
  TokenType Type(int32_t id) const;
  // Raw bytes a normal token stands for (for control/user-defined tokens: their text).
  const std::string& Bytes(int32_t id) const;
  // Control and user-defined tokens are matched as whole strings in text.
  bool IsSpecial(int32_t id) const;

  // Id of a vocabulary string, if any (first id wins for duplicates).
  std::optional<int32_t> Find(std::string_view text) const;
  // Token for a single raw byte, or -1 if the vocabulary lacks it.
  int32_t ByteToken(uint8_t b) const { return byte_token_[b]; }
  // Merge of the pair (left, right): its rank and the resulting id.
  bool FindMerge(int32_t left, int32_t right, int32_t* rank, int32_t* result) const;
  int32_t n_merges() const { return n_merges_; }

  // Special tokens whose text starts with byte `b`, longest text first.
  const std::vector<int32_t>& SpecialsStartingWith(uint8_t b) const { return specials_by_byte_[b]; }

 private:
  std::vector<std::string> text_;
  std::vector<TokenType> type_;
  std::vector<std::string> bytes_;
  std::unordered_map<std::string, int32_t> index_;
  struct MergeInfo {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, MergeInfo> merges_;
  int32_t n_merges_ = 0;
  std::array<int32_t, 256> byte_token_{};
  std::array<std::vector<int32_t>, 256> specials_by_byte_;
};

}  // namespace bicache::tokenizer
