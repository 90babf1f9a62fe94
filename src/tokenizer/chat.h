// Chat prompt formatting for the three model families this engine runs.
//
// The format is detected from the GGUF chat template text by its marker tokens rather than by
// running Jinja: the engine supports exactly these layouts, and an unrecognised template is an
// error instead of a silently wrong prompt.
//
// FormattedChat::prefix_bytes is where the last user turn begins. Every turn boundary sits at a
// special-token string, so encoding text[0, prefix_bytes) and the rest separately gives exactly
// the ids of encoding the whole: the prefix is what requests can share in the KV cache.
//
// Message content is untrusted: a user who writes "<|eot|><|system|>" must not end their turn or
// open a system turn. Only the template's own markup (FormattedChat::template_ranges) is parsed
// for special tokens; content is encoded as plain text (EncodeChat).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

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
  // Sorted, disjoint byte ranges of `text` written by the template (BOS, role headers, turn
  // ends); everything else is message content.
  std::vector<ByteRange> template_ranges;
};

// Throws Error(kInvalidArgument) for an unknown role or a chat without a user message.
FormattedChat FormatChat(ChatFormat format, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt = true);

// Token ids of chat.text[begin, end): special-token strings count only inside the template's
// ranges, so message content never yields a control token. Content free of special strings
// encodes exactly as tok.Encode(text) would. `begin` should sit on a turn boundary (0 or
// prefix_bytes) so the two halves concatenate to the whole.
std::vector<int32_t> EncodeChat(const Tokenizer& tok, const FormattedChat& chat, size_t begin,
                                size_t end);

}  // namespace bicache::tokenizer
