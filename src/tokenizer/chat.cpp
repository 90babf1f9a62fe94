#include "tokenizer/chat.h"

#include <algorithm>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace bicache::tokenizer {
namespace {

bool Contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

// Jinja's `trim` is Python's str.strip(): removes Unicode whitespace at both ends.
bool IsPySpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string_view Trim(std::string_view s) {
  uint32_t cp;
  size_t b = 0;
  while (b < s.size()) {
    size_t n = DecodeUtf8Char(s, b, &cp);
    if (n == 0 || !IsPySpace(cp)) break;
    b += n;
  }
  size_t e = s.size();
  while (e > b) {
    size_t start = e - 1;  // step back to the start of the last character
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && e - start < 4) {
      --start;
    }
    size_t n = DecodeUtf8Char(s, start, &cp);
    if (n == 0 || start + n != e || !IsPySpace(cp)) break;
    e = start;
  }
  return s.substr(b, e - b);
}

void CheckRoles(const std::vector<ChatMessage>& messages) {
  bool has_user = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r != "system" && r != "user" && r != "assistant") {
      throw Error(ErrorKind::kInvalidArgument, "message " + std::to_string(i) +
                                                   " has unsupported role '" + r +
                                                   "' (expected system, user or assistant)");
    }
    has_user |= r == "user";
  }
  if (!has_user) throw Error(ErrorKind::kInvalidArgument, "chat has no user message");
}

}  // namespace

const char* ChatFormatName(ChatFormat f) {
  switch (f) {
    case ChatFormat::kTiny:
      return "tiny";
    case ChatFormat::kLlada:
      return "llada";
    case ChatFormat::kDream:
      return "dream";
  }
  return "?";
}

ChatFormat DetectChatFormat(std::string_view t) {
  bool tiny = Contains(t, "<|assistant|>") && Contains(t, "<|system|>");
  bool llada = Contains(t, "<|start_header_id|>");
  bool dream = Contains(t, "<|im_start|>");
  int hits = int(tiny) + int(llada) + int(dream);
  if (hits == 1) return tiny ? ChatFormat::kTiny : llada ? ChatFormat::kLlada : ChatFormat::kDream;
  std::string shown(t.substr(0, 80));
  throw Error(ErrorKind::kUnsupported,
              std::string("unknown chat template ") +
                  (t.empty() ? "(tokenizer.chat_template is absent or empty)"
                             : (hits == 0 ? "(no known markers): '" : "(ambiguous markers): '") +
                                   shown + (t.size() > 80 ? "...'" : "'")));
}

FormattedChat FormatChat(ChatFormat format, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt) {
  CheckRoles(messages);
  FormattedChat out;
  std::string& s = out.text;
  // Template markup is recorded as a special range (adjacent pieces merge); content is not.
  auto markup = [&out, &s](std::string_view piece) {
    if (piece.empty()) return;
    if (!out.template_ranges.empty() && out.template_ranges.back().end == s.size()) {
      out.template_ranges.back().end += piece.size();
    } else {
      out.template_ranges.push_back({s.size(), s.size() + piece.size()});
    }
    s += piece;
  };
  auto content = [&s](std::string_view piece) { s += piece; };
  switch (format) {
    case ChatFormat::kTiny:
      // tools/train/format.py CHAT_TEMPLATE: assistant content is written after one space,
      // matching how answers were tokenized in training (" " + answer).
      markup("<|bos|>");
      for (const ChatMessage& m : messages) {
        if (m.role == "user") out.prefix_bytes = s.size();
        markup("<|" + m.role + "|>\n");
        if (m.role == "assistant") markup(" ");
        content(m.content);
        markup("<|eot|>");
      }
      if (add_generation_prompt) markup("<|assistant|>\n");
      break;
    case ChatFormat::kLlada:
      // LLaDA-8B-Instruct template: BOS before the first message only; content | trim.
      markup("<|startoftext|>");
      for (const ChatMessage& m : messages) {
        if (m.role == "user") out.prefix_bytes = s.size();
        markup("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
        content(Trim(m.content));
        markup("<|eot_id|>");
      }
      if (add_generation_prompt) markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case ChatFormat::kDream:
      // Qwen2 ChatML: the default system prompt is inserted when the chat does not open with
      // a system message.
      if (messages.empty() || messages.front().role != "system") {
        markup("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n");
      }
      for (const ChatMessage& m : messages) {
        if (m.role == "user") out.prefix_bytes = s.size();
        markup("<|im_start|>" + m.role + "\n");
        content(m.content);
        markup("<|im_end|>\n");
      }
      if (add_generation_prompt) markup("<|im_start|>assistant\n");
      break;
  }
  return out;
}

std::vector<int32_t> EncodeChat(const Tokenizer& tok, const FormattedChat& chat, size_t begin,
                                size_t end) {
  end = std::min(end, chat.text.size());
  begin = std::min(begin, end);
  std::vector<ByteRange> ranges;  // template ranges clipped to [begin, end), relative to begin
  for (const ByteRange& r : chat.template_ranges) {
    const size_t b = std::max(r.begin, begin), e = std::min(r.end, end);
    if (b < e) ranges.push_back({b - begin, e - begin});
  }
  return tok.EncodeWithSpecialRanges(std::string_view(chat.text).substr(begin, end - begin),
                                     ranges);
}

}  // namespace bicache::tokenizer
