// Tokenizer fuzzing: arbitrary bytes through Encode (with and without special-token parsing) and
// arbitrary ids through Decode, on the golden LLaDA (llama-bpe) and Dream (qwen2) vocabularies.
//
// Input: u8 selector (bit 0: which tokenizer), then the text; the same bytes read as int32 ids
// feed the decoder.
#include <cstring>
#include <vector>

#include "fixtures.h"
#include "targets.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace bicache::fuzz {

void TokenizerText(Input in) {
  if (in.empty()) return;
  const tokenizer::Tokenizer& tok =
      (in[0] & 1) ? GoldenDreamTokenizer() : GoldenLlada().tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(in.data() + 1), in.size() - 1);
  const int32_t n_vocab = tok.n_vocab();

  for (bool special : {false, true}) {
    const std::vector<int32_t> ids = tok.Encode(text, special);
    for (int32_t id : ids)
      BICACHE_FUZZ_CHECK(id >= 0 && id < n_vocab, "Encode produced an id outside the vocabulary");
    // Byte-level BPE is lossless: every byte has a token, and special tokens decode to their text.
    BICACHE_FUZZ_CHECK(tok.Decode(ids) == text, special ? "Decode(Encode(text, special)) != text"
                                                        : "Decode(Encode(text)) != text");
    BICACHE_FUZZ_CHECK(ids.size() <= text.size(), "more tokens than bytes");
    const std::string shown = tok.DecodeText(ids, /*skip_special=*/true);
    BICACHE_FUZZ_CHECK(tokenizer::IsValidUtf8(shown), "DecodeText returned invalid UTF-8");
  }

  // The same bytes as ids: in-range ids decode, out-of-range ones are an invalid argument.
  std::vector<int32_t> ids(text.size() / 4);
  if (!ids.empty()) std::memcpy(ids.data(), text.data(), ids.size() * 4);
  bool in_range = true;
  for (int32_t id : ids) in_range &= id >= 0 && id < n_vocab;
  try {
    tok.Decode(ids);
    const std::string shown = tok.DecodeText(ids, /*skip_special=*/false);
    BICACHE_FUZZ_CHECK(tokenizer::IsValidUtf8(shown), "DecodeText returned invalid UTF-8");
    BICACHE_FUZZ_CHECK(in_range, "Decode accepted an out-of-range id");
  } catch (const Error& e) {
    BICACHE_FUZZ_CHECK(!in_range && e.kind() == ErrorKind::kInvalidArgument,
                       std::string("Decode threw for valid ids: ") + e.what());
  }
}

}  // namespace bicache::fuzz
