#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "util/error.h"

namespace bicache::tokenizer {
namespace {

// GPT-2 (OpenAI's encoder.py): contractions, optional-space + letters / numbers / other, then
// whitespace not followed by non-space (so the last space attaches to the next word), then any
// remaining whitespace.
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// "gpt2-digits" (bpe.py's digit variant for the tiny model, tried in its twelfth run and not
// adopted, docs/model.md; no llama.cpp converter writes it):
// the GPT-2 pattern with every digit its own piece, a leading space kept on the first digit, so
// " 63" is " 6" + "3". Arithmetic then works on digits instead of one token per number.
constexpr const char* kGpt2Digits =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// LLaMA-3 (tokenizer.json of Meta-Llama-3): case-insensitive contractions; letters may take one
// leading non-letter/non-digit/non-newline char; digits in groups of 1-3; punctuation runs with
// an optional leading space absorb following newlines; newline runs keep their leading spaces.
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Qwen2 (tokenizer.json of Qwen2 / Dream): as LLaMA-3 but every digit is its own piece.
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Ling / BailingMoe (llama.cpp LLAMA_VOCAB_PRE_TYPE_BAILINGMOE, which `tokenizer.ggml.pre`
// "bailingmoe" (Ling 1.x), "bailingmoe2" (Ling 2.0, LLaDA2.x) and "llada-moe" all select), as
// llama.cpp compiles it (src/llama-vocab.cpp, llm_tokenizer_bpe's constructor): contractions only
// after an apostrophe, case spelled out per letter ([sS], not (?i), so U+017F long s is no 's');
// every digit its own piece; a whitespace run up to its last newline is one piece
// (\s*[\r\n]). llama.cpp made the tokenizer.json original's possessive `?+` / `++` greedy; that
// changes no split, as tools/reference/make_pretok_golden.py checks. Otherwise it splits as qwen2.
// llama.cpp sets no ignore_merges for it (and clean_spaces = false, a decode step bicache lacks).
constexpr const char* kBailingMoe =
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

struct Choice {
  const char* kind;
  const char* pattern;
  bool ignore_merges;
};

// Names as written to `tokenizer.ggml.pre` by llama.cpp's converter. "llada" is accepted as an
// alias of the LLaMA-3 pattern: LLaDA-8B ships a LLaMA-3-derived tokenizer, but which name the
// converter writes for it could not be confirmed, so both spellings resolve here.
bool Lookup(std::string_view pre, Choice* c) {
  if (pre == "default" || pre == "gpt2" || pre == "gpt-2") {
    *c = {"gpt2", kGpt2, false};
  } else if (pre == "gpt2-digits") {
    *c = {"gpt2-digits", kGpt2Digits, false};
  } else if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "llada") {
    *c = {"llama3", kLlama3, true};
  } else if (pre == "qwen2" || pre == "dream") {
    *c = {"qwen2", kQwen2, false};
  } else if (pre == "bailingmoe" || pre == "bailingmoe2" || pre == "llada-moe") {
    *c = {"bailingmoe", kBailingMoe, false};
  } else {
    return false;
  }
  return true;
}

}  // namespace

struct PreTokenizer::Code {
  pcre2_code* re = nullptr;
  ~Code() { pcre2_code_free(re); }
};

PreTokenizer::PreTokenizer(std::string_view pre) {
  Choice c{};
  if (!Lookup(pre, &c)) {
    throw Error(ErrorKind::kUnsupported,
                "tokenizer.ggml.pre '" + std::string(pre) +
                    "' is not a supported pre-tokenizer (supported: default, gpt2, gpt2-digits, "
                    "llama-bpe, llama3, llada, qwen2, dream, bailingmoe, bailingmoe2, llada-moe)");
  }
  kind_ = c.kind;
  pattern_ = c.pattern;
  ignore_merges_ = c.ignore_merges;
  code_ = std::make_unique<Code>();
  int err = 0;
  PCRE2_SIZE err_off = 0;
  code_->re =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
  if (code_->re == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw Error(ErrorKind::kInternal, "pre-tokenizer regex '" + kind_ + "' failed to compile at " +
                                          std::to_string(err_off) + ": " +
                                          reinterpret_cast<const char*>(msg));
  }
  // JIT is a speed-up only; without it (unsupported CPU/build) the interpreter gives the same
  // results, so a JIT failure is ignored.
  (void)pcre2_jit_compile(code_->re, PCRE2_JIT_COMPLETE);
}

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(code_->re, nullptr), &pcre2_match_data_free);
  if (!md) throw Error(ErrorKind::kResource, "out of memory for pre-tokenizer match data");
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(code_->re, subject, text.size(), pos, 0, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      throw Error(ErrorKind::kResource,
                  std::string("pre-tokenizer match failed: ") + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    size_t begin = ov[0], end = ov[1];
    if (begin > pos) pieces.push_back(text.substr(pos, begin - pos));  // unmatched (invalid) bytes
    if (end <= begin) {  // no pattern here matches empty, but never loop forever
      end = begin + 1;
    }
    pieces.push_back(text.substr(begin, end - begin));
    pos = end;
  }
  if (pos < text.size()) pieces.push_back(text.substr(pos));
  return pieces;
}

}  // namespace bicache::tokenizer
