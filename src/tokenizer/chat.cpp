#include "tokenizer/chat.h"

#include <algorithm>
#include <string>

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

// ---- Formatting ---------------------------------------------------------------------------

// The prompt under construction: template markup is recorded as a special range (adjacent pieces
// merge), message content is not.
class ChatWriter {
 public:
  explicit ChatWriter(FormattedChat* out) : out_(out) {}
  void Markup(std::string_view piece) {
    if (piece.empty()) return;
    std::vector<ByteRange>& r = out_->template_ranges;
    if (!r.empty() && r.back().end == out_->text.size()) {
      r.back().end += piece.size();
    } else {
      r.push_back({out_->text.size(), out_->text.size() + piece.size()});
    }
    out_->text += piece;
  }
  void Content(std::string_view piece) { out_->text += piece; }
  void MarkPrefix() { out_->prefix_bytes = out_->text.size(); }

 private:
  FormattedChat* out_;
};

std::string_view StripNewlines(std::string_view s, bool left, bool right) {
  while (left && !s.empty() && s.front() == '\n') s.remove_prefix(1);
  while (right && !s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

// An assistant message as the Qwen3 and Ling 2.0 templates read it: with a "</think>" in it,
// the reasoning is what lies between the last "<think>" and the first "</think>" and the answer
// what follows the last "</think>" (Jinja: split('</think>')[0] ... [-1]), newlines trimmed.
struct AssistantParts {
  std::string_view reasoning;
  std::string_view answer;
};
AssistantParts SplitThink(std::string_view c) {
  constexpr std::string_view kClose = "</think>", kOpen = "<think>";
  const size_t first_close = c.find(kClose);
  if (first_close == std::string_view::npos) return {{}, c};
  std::string_view before = StripNewlines(c.substr(0, first_close), false, true);
  const size_t open = before.rfind(kOpen);
  if (open != std::string_view::npos) before = before.substr(open + kOpen.size());
  return {StripNewlines(before, true, false),
          StripNewlines(c.substr(c.rfind(kClose) + kClose.size()), true, false)};
}

// The index of the last user message that is a query, not a wrapped tool response (the Qwen3
// and Ling 2.0 templates' last_query_index); messages after it render their reasoning.
size_t LastQueryIndex(const std::vector<ChatMessage>& m) {
  for (size_t i = m.size(); i-- > 0;) {
    const std::string& c = m[i].content;
    const bool tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (m[i].role == "user" && !tool_response) return i;
  }
  return m.size() - 1;
}

// tools/train/format.py CHAT_TEMPLATE: assistant content is written after one space, matching
// how answers were tokenized in training (" " + answer).
void FormatTiny(const std::vector<ChatMessage>& messages, bool gen, ChatWriter& w) {
  w.Markup("<|bos|>");
  for (const ChatMessage& m : messages) {
    if (m.role == "user") w.MarkPrefix();
    w.Markup("<|" + m.role + "|>\n");
    if (m.role == "assistant") w.Markup(" ");
    w.Content(m.content);
    w.Markup("<|eot|>");
  }
  if (gen) w.Markup("<|assistant|>\n");
}

// LLaDA-8B-Instruct template: BOS before the first message only; content | trim.
void FormatLlada(const std::vector<ChatMessage>& messages, bool gen, ChatWriter& w) {
  w.Markup("<|startoftext|>");
  for (const ChatMessage& m : messages) {
    if (m.role == "user") w.MarkPrefix();
    w.Markup("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
    w.Content(Trim(m.content));
    w.Markup("<|eot_id|>");
  }
  if (gen) w.Markup("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// ChatML as Dream's and Qwen2.5's templates write it: `default_system` opens the chat when the
// first message is not a system message; every message is one turn; no BOS.
void FormatChatml(const std::vector<ChatMessage>& messages, bool gen,
                  std::string_view default_system, ChatWriter& w) {
  if (messages.front().role != "system") {
    w.Markup("<|im_start|>system\n" + std::string(default_system) + "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    if (m.role == "user") w.MarkPrefix();
    w.Markup("<|im_start|>" + m.role + "\n");
    w.Content(m.content);
    w.Markup("<|im_end|>\n");
  }
  if (gen) w.Markup("<|im_start|>assistant\n");
}

// Qwen3's template (SDAR-*-Chat): no default system prompt, no BOS. An assistant turn before the
// last query keeps only its answer; one after it that is the last message, or that has reasoning,
// is written with its <think> block. The generation prompt has no think block (the template adds
// an empty one only for enable_thinking=false, which the engine does not pass).
void FormatQwen3(const std::vector<ChatMessage>& messages, bool gen, ChatWriter& w) {
  const size_t last_query = LastQueryIndex(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") w.MarkPrefix();
    if (m.role != "assistant") {
      w.Markup("<|im_start|>" + m.role + "\n");
      w.Content(m.content);
      w.Markup("<|im_end|>\n");
      continue;
    }
    const AssistantParts p = SplitThink(m.content);
    const bool last = i + 1 == messages.size();
    if (i > last_query && (last || !p.reasoning.empty())) {
      w.Markup("<|im_start|>assistant\n<think>\n");
      w.Content(StripNewlines(p.reasoning, true, true));
      w.Markup("\n</think>\n\n");
      w.Content(StripNewlines(p.answer, true, false));
    } else {
      w.Markup("<|im_start|>assistant\n");
      w.Content(p.answer);
    }
    w.Markup("<|im_end|>\n");
  }
  if (gen) w.Markup("<|im_start|>assistant\n");
}

// Ling 2.0's template (BailingMoeV2; the LLaDA2.0 prompts published with SGLang follow it): the
// system turn is always written and ends with "detailed thinking off" (the template's
// thinking_option); an opening system message goes before it, followed by "\n". No BOS.
void FormatLing(const std::vector<ChatMessage>& messages, bool gen, ChatWriter& w) {
  w.Markup("<role>SYSTEM</role>");
  if (messages.front().role == "system") {
    w.Content(messages.front().content);
    w.Markup("\n");
  }
  w.Markup("detailed thinking off<|role_end|>");
  const size_t last_query = LastQueryIndex(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system" && i == 0) continue;
    if (m.role == "user") w.MarkPrefix();
    if (m.role != "assistant") {
      w.Markup(m.role == "user" ? "<role>HUMAN</role>" : "<role>SYSTEM</role>");
      w.Content(m.content);
      w.Markup("<|role_end|>");
      continue;
    }
    const AssistantParts p = SplitThink(m.content);
    w.Markup("<role>ASSISTANT</role>");
    if (i > last_query && !p.reasoning.empty()) {
      w.Markup("\n<think>\n");
      w.Content(StripNewlines(p.reasoning, true, true));
      w.Markup("\n</think>\n\n");
      w.Content(StripNewlines(p.answer, true, false));
    } else {
      w.Content(p.answer);
    }
    w.Markup("<|role_end|>");
  }
  if (gen) w.Markup("<role>ASSISTANT</role>");
}

// ---- Detection -----------------------------------------------------------------------------

constexpr std::string_view kDreamSystem = "You are a helpful assistant.";
constexpr std::string_view kQwen25System =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

[[noreturn]] void Unknown(std::string_view t, std::string_view why) {
  std::string shown(t.substr(0, 80));
  throw Error(
      ErrorKind::kUnsupported,
      std::string("unknown chat template ") +
          (t.empty() ? "(tokenizer.chat_template is absent or empty)"
                     : "(" + std::string(why) + "): '" + shown + (t.size() > 80 ? "...'" : "'")));
}

// Which ChatML layout: the default system prompt written in the template, else Qwen3's <think>
// handling, else the architecture.
ChatFormat ChatmlFormat(std::string_view t, std::string_view architecture) {
  // Qwen2.5's prompt contains Dream's as its tail, so it is looked for first.
  const bool qwen25 = Contains(t, kQwen25System);
  const bool dream = !qwen25 && Contains(t, kDreamSystem);
  const bool think = Contains(t, "<think>");
  if ((qwen25 || dream) && think) {
    Unknown(t, "ambiguous markers: a default system prompt and <think> handling");
  }
  if (qwen25) return ChatFormat::kQwen25;
  if (dream) return ChatFormat::kDream;
  if (think || architecture == "sdar") return ChatFormat::kQwen3;
  Unknown(t, "ChatML without a default system prompt or <think> handling, for architecture '" +
                 std::string(architecture) + "'");
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
    case ChatFormat::kQwen25:
      return "qwen2.5";
    case ChatFormat::kQwen3:
      return "qwen3";
    case ChatFormat::kLing:
      return "ling";
  }
  return "?";
}

ChatFormat DetectChatFormat(std::string_view t, std::string_view architecture) {
  const bool tiny = Contains(t, "<|assistant|>") && Contains(t, "<|system|>");
  const bool llada = Contains(t, "<|start_header_id|>");
  const bool chatml = Contains(t, "<|im_start|>");
  const bool ling = Contains(t, "<role>HUMAN</role>") && Contains(t, "<|role_end|>");
  const int hits = int(tiny) + int(llada) + int(chatml) + int(ling);
  if (hits != 1) Unknown(t, hits == 0 ? "no known markers" : "ambiguous markers");
  if (tiny) return ChatFormat::kTiny;
  if (llada) return ChatFormat::kLlada;
  if (ling) return ChatFormat::kLing;
  return ChatmlFormat(t, architecture);
}

FormattedChat FormatChat(ChatFormat format, const std::vector<ChatMessage>& messages,
                         bool add_generation_prompt) {
  CheckRoles(messages);
  FormattedChat out;
  ChatWriter w(&out);
  switch (format) {
    case ChatFormat::kTiny:
      FormatTiny(messages, add_generation_prompt, w);
      break;
    case ChatFormat::kLlada:
      FormatLlada(messages, add_generation_prompt, w);
      break;
    case ChatFormat::kDream:
      FormatChatml(messages, add_generation_prompt, kDreamSystem, w);
      break;
    case ChatFormat::kQwen25:
      FormatChatml(messages, add_generation_prompt, kQwen25System, w);
      break;
    case ChatFormat::kQwen3:
      FormatQwen3(messages, add_generation_prompt, w);
      break;
    case ChatFormat::kLing:
      FormatLing(messages, add_generation_prompt, w);
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
