// Chat formatting fuzzing: template detection on arbitrary text, FormatChat in every format on
// arbitrary messages, and LoadedModel::ChatPrompt's promise that encoding the prefix and the rest
// separately equals encoding the whole prompt (the property prefix caching relies on).
//
// Input: messages separated by 0x00; each message's first byte picks the role (4 -> an invalid
// one), the rest is its content. The whole input is also tried as a chat template.
#include <vector>

#include "fixtures.h"
#include "targets.h"
#include "tokenizer/chat.h"
#include "util/error.h"

namespace bicache::fuzz {

void ChatFormat(Input in) {
  const std::string_view all(reinterpret_cast<const char*>(in.data()), in.size());
  try {
    tokenizer::DetectChatFormat(all);
    tokenizer::DetectChatFormat(all, "sdar");
  } catch (const Error& e) {
    BICACHE_FUZZ_CHECK(e.kind() == ErrorKind::kUnsupported,
                       "DetectChatFormat threw the wrong kind");
  }

  static const char* const kRoles[] = {"system", "user", "assistant", "user", "tool"};
  std::vector<tokenizer::ChatMessage> messages;
  for (size_t begin = 0; begin < all.size() && messages.size() < 64;) {
    size_t end = all.find('\0', begin);
    if (end == std::string_view::npos) end = all.size();
    const std::string_view m = all.substr(begin, end - begin);
    if (!m.empty()) {
      messages.push_back({kRoles[static_cast<uint8_t>(m[0]) % 5], std::string(m.substr(1))});
    }
    begin = end + 1;
  }

  for (auto format : {tokenizer::ChatFormat::kTiny, tokenizer::ChatFormat::kLlada,
                      tokenizer::ChatFormat::kDream, tokenizer::ChatFormat::kQwen25,
                      tokenizer::ChatFormat::kQwen3, tokenizer::ChatFormat::kLing}) {
    try {
      const tokenizer::FormattedChat chat = tokenizer::FormatChat(format, messages);
      BICACHE_FUZZ_CHECK(chat.prefix_bytes <= chat.text.size(), "prefix_bytes past the text");
    } catch (const Error& e) {
      BICACHE_FUZZ_CHECK(e.kind() == ErrorKind::kInvalidArgument,
                         "FormatChat threw the wrong kind");
    }
  }

  const engine::LoadedModel& lm = GoldenLlada();
  engine::Prompt p;
  try {
    p = lm.ChatPrompt(messages);
  } catch (const Error& e) {
    BICACHE_FUZZ_CHECK(e.kind() == ErrorKind::kInvalidArgument, "ChatPrompt threw the wrong kind");
    return;
  }
  BICACHE_FUZZ_CHECK(p.prefix_len >= 0 && static_cast<size_t>(p.prefix_len) <= p.tokens.size(),
                     "prefix_len outside the prompt");
  const tokenizer::FormattedChat chat = tokenizer::FormatChat(lm.chat_format(), messages);
  BICACHE_FUZZ_CHECK(tokenizer::EncodeChat(lm.tokenizer(), chat, 0, chat.text.size()) == p.tokens,
                     "encoding the prefix and the rest separately differs from encoding the whole");
}

}  // namespace bicache::fuzz
