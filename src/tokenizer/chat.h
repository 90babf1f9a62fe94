// Chat prompt formatting for the three model families this engine runs.
//
// The format is detected from the GGUF chat template text by its marker tokens rather than by
// running Jinja: the engine supports exactly these layouts, and an unrecognised template is an
// error instead of a silently wrong prompt.
//
// FormattedChat::prefix_bytes is where the last user turn begins. Every turn boundary sits at a
// special-token string, so encoding text[0, prefix_bytes) and the rest separately gives exactly
// the ids of encoding the whole: the prefix is what requests can share in the KV cache.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace bicache::tokenizer {

enum class ChatFormat {
  kTiny,   // project's tiny model: <|bos|><|system|>\n...<|eot|><|user|>\n...<|eot|><|assistant|>\n
  kLlada,  // LLaDA-8B-Instruct: LLaMA-3 headers, <|startoftext|> BOS, content trimmed
  kDream,  // Dream-v0-Instruct: Qwen2 ChatML with the default system prompt
};

const char* ChatFormatName(ChatFormat f);

// Throws Error(kUnsupported, "unknown chat template ...") if the template is empty, matches
// none of the formats, or matches more than one.
ChatFormat DetectChatFormat(std::string_view chat_template);

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

struct FormattedChat {
  std::string text;         // the prompt, special tokens written as their text
  size_t prefix_bytes = 0;  // byte offset where the last user turn begins
};

// Throws Error(kInvalidArgument) for an unknown role or a chat without a user message.
FormattedChat FormatChat(ChatFormat format, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt = true);

}  // namespace bicache::tokenizer
