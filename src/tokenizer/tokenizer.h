// Byte-level BPE tokenizer (GGUF `tokenizer.ggml.model = "gpt2"`), as used by LLaDA (LLaMA-3
// vocabulary) and Dream (Qwen2 vocabulary) and by the project's tiny model.
//
// Encode: control/user-defined token strings are cut out of the text first (leftmost, longest
// at a position); the rest is split by the pre-tokenizer regex; each piece's bytes start as byte
// tokens and are merged pairwise, lowest merge rank first (ties: leftmost), as in HF tokenizers
// and llama.cpp. Cost is O(n log n) per piece, so adversarial long pieces stay cheap.
//
// All methods are const and thread-safe; one Tokenizer can serve every request.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab.h"

namespace bicache::format {
class GgufFile;
}

namespace bicache::tokenizer {

// A byte range [begin, end) of some text.
struct ByteRange {
  size_t begin = 0, end = 0;
};

class Tokenizer {
 public:
  // Validates everything; throws Error(kModel) naming the key, or Error(kUnsupported) for an
  // unknown pre-tokenizer.
  explicit Tokenizer(const TokenizerData& data);
  // Reads the tokenizer.* keys (see tokenizer_gguf.cpp). Error(kUnsupported) for a
  // tokenizer.ggml.model other than "gpt2".
  static Tokenizer FromGguf(const format::GgufFile& file);

  // Token ids for `text` (any bytes; invalid UTF-8 is encoded through byte tokens). With
  // parse_special=false, special-token strings in the text are encoded as ordinary text, which
  // is what untrusted user content should get.
  std::vector<int32_t> Encode(std::string_view text, bool parse_special = true) const;
  // As Encode, but a special-token string becomes its token only where it lies wholly inside one
  // of `special_ranges` (sorted, disjoint, within text); everywhere else it is ordinary text.
  // Ordinary text between two specials is encoded as one run whichever ranges it crosses, so the
  // ids equal Encode(text) whenever no special string occurs outside the ranges. Chat prompts use
  // this: template markup is special, message content never is (tokenizer/chat.h).
  std::vector<int32_t> EncodeWithSpecialRanges(std::string_view text,
                                               std::span<const ByteRange> special_ranges) const;

  // Raw bytes of one token: "" for a control token when skip_special. Out-of-range ids throw
  // Error(kInvalidArgument).
  const std::string& TokenBytes(int32_t id, bool skip_special = false) const;
  // Concatenated raw bytes (may be invalid UTF-8 if the ids are).
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // As Decode, but valid UTF-8 with U+FFFD for ill-formed bytes.
  std::string DecodeText(std::span<const int32_t> ids, bool skip_special = false) const;

  const Vocab& vocab() const { return vocab_; }
  int32_t n_vocab() const { return vocab_.size(); }
  const std::string& pre() const { return pre_name_; }
  const PreTokenizer& pretokenizer() const { return pretok_; }
  int32_t bos_id() const { return bos_; }
  int32_t eos_id() const { return eos_; }
  int32_t eot_id() const { return eot_; }
  int32_t pad_id() const { return pad_; }
  int32_t mask_id() const { return mask_; }
  const std::string& chat_template() const { return chat_template_; }

 private:
  void EncodePlain(std::string_view text, std::vector<int32_t>* out) const;
  void EncodePiece(std::string_view piece, std::vector<int32_t>* out) const;

  Vocab vocab_;
  PreTokenizer pretok_;
  std::string pre_name_;
  int32_t bos_, eos_, eot_, pad_, mask_;
  std::string chat_template_;
};

}  // namespace bicache::tokenizer
