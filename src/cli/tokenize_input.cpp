#include "cli/tokenize_input.h"

#include "tokenizer/tokenizer.h"

namespace bicache::cli {

std::vector<int32_t> TokenizeForCli(const model::Model& model, const std::string& text) {
  return tokenizer::Tokenizer::FromGguf(model.file()).Encode(text);
}

std::string TokenTextForCli(const model::Model& model, int32_t id) {
  try {
    static thread_local const model::Model* cached_for = nullptr;
    static thread_local std::unique_ptr<tokenizer::Tokenizer> tok;
    if (cached_for != &model) {
      tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::FromGguf(model.file()));
      cached_for = &model;
    }
    std::string s = tok->DecodeText({&id, 1});
    for (char& c : s)
      if (c == '\n') c = ' ';
    return "'" + s + "'";
  } catch (const std::exception&) {
    return "";  // a file without a usable tokenizer still gets its logits summary
  }
}

}  // namespace bicache::cli
