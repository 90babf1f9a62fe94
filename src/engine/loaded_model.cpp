#include "engine/loaded_model.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "model/arch.h"
#include "util/error.h"

namespace bicache::engine {

std::unique_ptr<LoadedModel> LoadedModel::Load(const std::string& path,
                                               format::OpenOptions options) {
  auto lm = std::unique_ptr<LoadedModel>(new LoadedModel());
  lm->path_ = path;
  lm->model_ = model::Model::Load(path, options);
  lm->tokenizer_ =
      std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::FromGguf(lm->model_->file()));
  if (lm->tokenizer_->n_vocab() > lm->model_->config().n_vocab) {
    throw Error(ErrorKind::kModel, "tokenizer has " + std::to_string(lm->tokenizer_->n_vocab()) +
                                       " tokens but the model's embedding only " +
                                       std::to_string(lm->model_->config().n_vocab));
  }
  try {
    lm->chat_ = tokenizer::DetectChatFormat(lm->tokenizer_->chat_template(),
                                            model::ArchName(lm->model_->config().arch));
  } catch (const Error& e) {
    lm->chat_error_ = e.what();
  }
  for (int32_t id : {lm->tokenizer_->eot_id(), lm->tokenizer_->eos_id()}) {
    if (id >= 0 &&
        std::find(lm->stop_ids_.begin(), lm->stop_ids_.end(), id) == lm->stop_ids_.end()) {
      lm->stop_ids_.push_back(id);
    }
  }
  // The EOS id pads the canvas after a stop, so it goes first when present.
  if (lm->tokenizer_->eos_id() >= 0 && lm->stop_ids_.size() == 2)
    std::swap(lm->stop_ids_[0], lm->stop_ids_[1]);
  return lm;
}

tokenizer::ChatFormat LoadedModel::chat_format() const {
  if (!chat_) throw Error(ErrorKind::kUnsupported, chat_error_);
  return *chat_;
}

void CheckTableForModel(const DepthTable& t, const model::ModelConfig& c, const std::string& path) {
  auto differs = [&](const char* what, int table, int model) {
    if (table <= 0 || table == model) return;
    throw Error(ErrorKind::kFormat, "depth table '" + path +
                                        "' is for another model: it was made for " +
                                        std::to_string(table) + " " + what + ", this model has " +
                                        std::to_string(model));
  };
  differs("layers", t.n_layer(), c.n_layer);
  differs("model width (d_model)", t.d_model(), c.d_model);
  differs("vocabulary entries", t.n_vocab(), c.n_vocab);
}

DepthTable LoadedModel::LoadDepthTable() const {
  const std::string p = depth_table_path();
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return DepthTable();
  DepthTable t = DepthTable::Load(p);
  CheckTableForModel(t, model_->config(), p);
  return t;
}

Prompt LoadedModel::ChatPrompt(const std::vector<tokenizer::ChatMessage>& messages) const {
  const tokenizer::FormattedChat chat = tokenizer::FormatChat(chat_format(), messages);
  Prompt p;
  // Turn boundaries sit on special tokens, so encoding the two parts separately equals encoding
  // the whole (tokenizer/chat.h). Message content is plain text: a user cannot forge a turn.
  p.tokens = tokenizer::EncodeChat(*tokenizer_, chat, 0, chat.prefix_bytes);
  // The shared prefix is the system prompt and the earlier turns. With neither (the last user turn
  // is the first message) only the template's opening tokens (<|bos|>) precede it: no prefix, not
  // a one-token cache entry that llm / fixed:B would reuse at full depth.
  const auto last_user =
      std::find_if(messages.rbegin(), messages.rend(),
                   [](const tokenizer::ChatMessage& m) { return m.role == "user"; });
  const bool earlier = last_user != messages.rend() && std::next(last_user) != messages.rend();
  p.prefix_len = earlier ? static_cast<int>(p.tokens.size()) : 0;
  const std::vector<int32_t> rest =
      tokenizer::EncodeChat(*tokenizer_, chat, chat.prefix_bytes, chat.text.size());
  p.tokens.insert(p.tokens.end(), rest.begin(), rest.end());
  return p;
}

Prompt LoadedModel::PlainPrompt(const std::string& prefix, const std::string& text) const {
  Prompt p;
  p.tokens = tokenizer_->Encode(prefix);
  p.prefix_len = prefix.empty() ? -1 : static_cast<int>(p.tokens.size());
  const std::vector<int32_t> rest = tokenizer_->Encode(text);
  p.tokens.insert(p.tokens.end(), rest.begin(), rest.end());
  return p;
}

std::string LoadedModel::Detokenize(std::span<const int32_t> ids) const {
  return tokenizer_->DecodeText(ids, /*skip_special=*/true);
}

}  // namespace bicache::engine
