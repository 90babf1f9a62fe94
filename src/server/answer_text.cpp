#include "server/answer_text.h"

#include <algorithm>

namespace bicache::server {

AnswerText::AnswerText(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops)
    : tokenizer_(tokenizer), stops_(std::move(stops)) {
  // An empty stop would match everywhere (and its size - 1 below would wrap): never one.
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

void AnswerText::Append(std::span<const int32_t> tokens) {
  if (stopped() || finished_) return;
  const size_t from = text_.size();
  for (const int32_t id : tokens) {
    text_ += decoder_.Push(tokenizer_.TokenBytes(id, /*skip_special=*/true));
    token_ends_.push_back(text_.size());
  }
  Search(from);
}

void AnswerText::Finish() {
  if (finished_) return;
  if (!stopped()) {
    const size_t from = text_.size();
    text_ += decoder_.Flush();
    if (!token_ends_.empty()) token_ends_.back() = text_.size();
    Search(from);
  }
  finished_ = true;
}

void AnswerText::Search(size_t from) {
  for (const std::string& s : stops_) {
    // A match ending past `from` starts at most s.size() - 1 bytes before it (none ended earlier).
    const size_t start = from >= s.size() - 1 ? from - (s.size() - 1) : 0;
    const size_t at = text_.find(s, start);
    if (at == std::string::npos) continue;
    const size_t end = at + s.size();
    if (end < stop_end_ || (end == stop_end_ && at < stop_at_)) {
      stop_at_ = at;
      stop_end_ = end;
    }
  }
}

size_t AnswerText::tokens_used() const {
  if (!stopped()) return token_ends_.size();
  const auto it = std::lower_bound(token_ends_.begin(), token_ends_.end(), stop_end_);
  return std::min(token_ends_.size(), static_cast<size_t>(it - token_ends_.begin()) + 1);
}

std::string_view AnswerText::text() const {
  return std::string_view(text_).substr(0, stopped() ? stop_at_ : text_.size());
}

std::string_view AnswerText::Sendable() const {
  if (stopped() || finished_) return text();
  // Hold back the longest tail that is a proper prefix of some stop string. It starts where a stop
  // string would start, so the cut is on a character boundary. The parser bounds a stop string's
  // length (kMaxStopBytes), so this is cheap.
  size_t held = 0;
  for (const std::string& s : stops_) {
    for (size_t k = std::min(s.size() - 1, text_.size()); k > held; --k) {
      if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
        held = k;
        break;
      }
    }
  }
  return std::string_view(text_).substr(0, text_.size() - held);
}

}  // namespace bicache::server
