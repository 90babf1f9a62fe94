// Tokenizer access for CLI commands: text -> ids with the model's own tokenizer, and a printable
// form of one token for summaries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.h"

namespace bicache::cli {

std::vector<int32_t> TokenizeForCli(const model::Model& model, const std::string& text);
std::string TokenTextForCli(const model::Model& model, int32_t id);
std::vector<int32_t> ParseTokenList(const std::string& text);

}  // namespace bicache::cli
