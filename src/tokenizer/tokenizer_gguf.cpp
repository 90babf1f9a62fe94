// Tokenizer::FromGguf lives in its own file so the rest of the tokenizer builds and tests
// without the GGUF reader.
#include <limits>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace bicache::tokenizer {
namespace {

int32_t OptionalId(const format::GgufFile& f, const char* key) {
  std::optional<uint64_t> v = f.GetUIntOr(key);
  if (!v) return -1;
  if (*v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    throw Error(ErrorKind::kModel,
                std::string(key) + ": token id " + std::to_string(*v) + " is out of range");
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

Tokenizer Tokenizer::FromGguf(const format::GgufFile& f) {
  std::optional<std::string> model = f.GetStringOr("tokenizer.ggml.model");
  if (!model) throw Error(ErrorKind::kModel, "tokenizer.ggml.model: key is missing");
  if (*model != "gpt2") {
    throw Error(ErrorKind::kUnsupported, "tokenizer.ggml.model '" + *model +
                                             "' is not supported (only 'gpt2' byte-level BPE)");
  }
  TokenizerData d;
  d.tokens = f.GetStringArray("tokenizer.ggml.tokens");
  if (f.Has("tokenizer.ggml.token_type")) {
    std::vector<int64_t> types = f.GetIntArray("tokenizer.ggml.token_type");
    d.token_type.reserve(types.size());
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] < std::numeric_limits<int32_t>::min() ||
          types[i] > std::numeric_limits<int32_t>::max()) {
        throw Error(ErrorKind::kModel,
                    "tokenizer.ggml.token_type: entry " + std::to_string(i) + " is out of range");
      }
      d.token_type.push_back(static_cast<int32_t>(types[i]));  // values checked by Vocab
    }
  }
  d.merges = f.GetStringArray("tokenizer.ggml.merges");
  d.pre = f.GetStringOr("tokenizer.ggml.pre").value_or("default");
  d.bos = OptionalId(f, "tokenizer.ggml.bos_token_id");
  d.eos = OptionalId(f, "tokenizer.ggml.eos_token_id");
  d.eot = OptionalId(f, "tokenizer.ggml.eot_token_id");
  d.pad = OptionalId(f, "tokenizer.ggml.padding_token_id");
  d.mask = OptionalId(f, "tokenizer.ggml.mask_token_id");
  d.chat_template = f.GetStringOr("tokenizer.chat_template").value_or("");
  return Tokenizer(d);
}

}  // namespace bicache::tokenizer
