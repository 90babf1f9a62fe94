// Chat prompt formatting for the model families this engine runs (and LLaDA2.x, whose
// architecture does not load yet).
//
// The format is detected from the GGUF chat template text by its marker tokens rather than by
// running Jinja: the engine supports exactly these layouts, and an unrecognised template is an
// error instead of a silently wrong prompt. What each published template writes, and where it was
// read, is in docs/model-formats.md ("Chat formats").
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
  kDream,  // ChatML, default system prompt "You are a helpful assistant." (Dream, Fast-dLLM v2)
  kQwen25,  // ChatML, Qwen2.5's default system prompt ("You are Qwen, created by Alibaba Cloud.
            // ...")
  kQwen3,   // ChatML without a default system prompt, Qwen3's <think> handling (SDAR)
  kLing,    // LLaDA2.x / Ling 2.0: <role>SYSTEM</role>...detailed thinking off<|role_end|>...
};

// The name printed and matched in tests: tiny, llada, dream, qwen2.5, qwen3, ling.
const char* ChatFormatName(ChatFormat f);

// The format of `chat_template` (tokenizer.chat_template). The template's markers decide; a ChatML
// template that has neither a default system prompt nor <think> markup is decided by
// `architecture` (general.architecture): `sdar` means Qwen3's layout. Throws
// Error(kUnsupported, "unknown chat template ...") if the template is empty, matches none of the
// formats, or matches more than one.
ChatFormat DetectChatFormat(std::string_view chat_template, std::string_view architecture = {});

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
