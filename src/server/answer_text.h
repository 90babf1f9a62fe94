// One answer as text: the committed tokens decoded in order, cut before the first stop string.
//
// Both reply shapes read the answer from here, so a streamed answer is byte for byte the
// non-streamed one. A stop string can arrive split across steps ("\n" then "\n"), so text that
// could still be the start of a stop string is held back from Sendable() until the next tokens
// rule it in or out: no stream ever carries text past a stop.
//
// Which stop ends the answer does not depend on how the tokens were grouped into steps: the match
// that ends first wins (on a tie, the one that starts first), the same however the text arrived.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace bicache::server {

// Longest stop string accepted, in bytes: the hold-back search is quadratic in it.
inline constexpr size_t kMaxStopBytes = 256;
// Most stop strings in one request (OpenAI's limit).
inline constexpr size_t kMaxStops = 4;

class AnswerText {
 public:
  // `stops`: UTF-8 strings (the request parser refuses empty ones; any left are dropped here);
  // none = no stop strings.
  AnswerText(const tokenizer::Tokenizer& tokenizer, std::vector<std::string> stops);

  // Appends committed answer tokens, in canvas order. After a stop matched, does nothing.
  void Append(std::span<const int32_t> tokens);
  // The answer is complete: bytes the decoder held back (an unfinished character) are written
  // out as U+FFFD and searched too. Later Appends do nothing.
  void Finish();

  // A stop string matched: the answer ends before it.
  bool stopped() const { return stop_at_ != std::string::npos; }
  // Tokens appended so far (all of them).
  size_t tokens() const { return token_ends_.size(); }
  // The tokens the answer used: up to the one that completed the stop match when stopped(), else
  // every token appended.
  size_t tokens_used() const;

  // The answer text so far, cut before the stop when stopped().
  std::string_view text() const;
  // The part of text() that can no longer change: before stopped() or Finish(), a tail that is a
  // possible start of a stop string is left out. Only ever grows.
  std::string_view Sendable() const;

 private:
  void Search(size_t from);  // looks for a match ending after `from`

  const tokenizer::Tokenizer& tokenizer_;
  std::vector<std::string> stops_;
  tokenizer::Utf8StreamDecoder decoder_;
  std::string text_;                     // every decoded byte (past the stop too)
  std::vector<size_t> token_ends_;       // [tokens] text_.size() after each token's bytes
  size_t stop_at_ = std::string::npos;   // where the matched stop starts in text_
  size_t stop_end_ = std::string::npos;  // where it ends
  bool finished_ = false;
};

}  // namespace bicache::server
