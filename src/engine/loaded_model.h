// A model file opened for generation: weights, tokenizer, chat format, stop tokens and the depth
// table saved next to it. Front ends (CLI, server, bench) start from this.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/depth_table.h"
#include "model/weights.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"

namespace bicache::engine {

// A prompt as token ids plus where its shareable prefix ends.
struct Prompt {
  std::vector<int32_t> tokens;
  int prefix_len = -1;  // -1 = not declared (automatic), else tokens [0, prefix_len) are shared
};

// Throws Error(kFormat) naming `path` when `table` was measured on another model (its layers,
// width or vocabulary differ from `config`'s; a table that does not record one is not judged by
// it).
void CheckTableForModel(const DepthTable& table, const model::ModelConfig& config,
                        const std::string& path);

class LoadedModel {
 public:
  // Throws bicache::Error naming the file and the problem.
  static std::unique_ptr<LoadedModel> Load(const std::string& path,
                                           format::OpenOptions options = {});

  const std::string& path() const { return path_; }
  const model::Model& model() const { return *model_; }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  // The chat format; throws Error(kUnsupported) naming the problem if the template is unknown.
  tokenizer::ChatFormat chat_format() const;
  // The depth table of the profile (SetDepthProfile; default safe: the one next to the model
  // file), or an empty table if the safe profile's file is not there. Throws Error(kFormat) for a
  // table of another model (layers, width or vocabulary differ).
  DepthTable LoadDepthTable() const;
  std::string depth_table_path() const { return DepthTable::PathForModel(path_, profile_); }
  // --depth-profile: "safe", "fast" or a table file (engine::CheckDepthProfile checks it first).
  void SetDepthProfile(std::string profile) { profile_ = std::move(profile); }
  const std::string& depth_profile() const { return profile_; }

  // Chat messages -> prompt; the prefix is everything before the last user turn.
  Prompt ChatPrompt(const std::vector<tokenizer::ChatMessage>& messages) const;
  // Plain text (special tokens parsed); `prefix` (may be empty) is prepended and declared shared.
  Prompt PlainPrompt(const std::string& prefix, const std::string& text) const;
  // The answer's text (special tokens skipped, valid UTF-8).
  std::string Detokenize(std::span<const int32_t> ids) const;

 private:
  std::string path_;
  std::string profile_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::optional<tokenizer::ChatFormat> chat_;
  std::string chat_error_;
  std::vector<int32_t> stop_ids_;
};

}  // namespace bicache::engine
