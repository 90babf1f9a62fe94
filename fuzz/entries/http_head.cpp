// HTTP head fuzzing for the connection front end (server/front/http_head.h): the rules that decide
// where a request's body ends, for the front and for the upstream it relays to. A disagreement
// between the two is request smuggling, so the properties checked are about agreement:
//   - FindHeadEnd finds the first blank line, and finds the same one in any longer buffer;
//   - a parsed request head, re-written by UpstreamHead (with a relay name), parses again to the
//     same method, target, version and body framing, with "Connection: close"; the re-written head
//     is one head (its end is its last byte) and holds no control byte but its line ends;
//   - a refused head says why, with a 4xx/5xx status;
//   - a response head re-written by ClientHead parses to the same status and framing;
//   - ChunkedScanner reads the same body end, payload size and verdict whether the bytes come at
//     once or in pieces (sizes taken from the input), and never claims more bytes than it got.
//
// Input: byte 0 seeds the piece sizes and picks HEAD or not for the response; the rest is the data.
#include <string>

#include "server/front/http_head.h"
#include "targets.h"

namespace bicache::fuzz {
namespace {

using server::front::BodyKind;
using server::front::ChunkedScanner;

bool HasControlBytes(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const bool line_end = c == '\n' || (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n');
    if ((c < 0x20 && c != '\t' && !line_end) || c == 0x7f) return true;
  }
  return false;
}

void CheckRequestHead(std::string_view head) {
  const auto parsed = server::front::ParseRequestHead(head);
  if (const auto* e = std::get_if<server::front::HeadError>(&parsed)) {
    BICACHE_FUZZ_CHECK(e->status >= 400 && e->status < 600, "refused head without an error code");
    BICACHE_FUZZ_CHECK(!e->message.empty(), "refused head without a reason");
    return;
  }
  const auto& h = std::get<server::front::RequestHead>(parsed);
  BICACHE_FUZZ_CHECK(!h.method.empty() && !h.target.empty(), "empty method or target");
  BICACHE_FUZZ_CHECK(h.body != BodyKind::kUntilClose, "a request body read until close");
  const std::string up = server::front::UpstreamHead(h, "0a1b2");
  BICACHE_FUZZ_CHECK(server::front::FindHeadEnd(up) == up.size(),
                     "the upstream head is not exactly one head");
  BICACHE_FUZZ_CHECK(!HasControlBytes(up), "the upstream head carries a control byte");
  const auto again = server::front::ParseRequestHead(up);
  const auto* u = std::get_if<server::front::RequestHead>(&again);
  BICACHE_FUZZ_CHECK(u != nullptr, "the upstream head of an accepted request is refused");
  BICACHE_FUZZ_CHECK(u->method == h.method && u->target == h.target && u->version == h.version,
                     "the upstream head changed the request line");
  BICACHE_FUZZ_CHECK(u->body == h.body && u->content_length == h.content_length,
                     "the upstream reads a different body framing");
  BICACHE_FUZZ_CHECK(!u->keep_alive && !u->expect_continue,
                     "the upstream head keeps the connection or expects 100-continue");
}

void CheckResponseHead(std::string_view head, bool head_request) {
  const auto r = server::front::ParseResponseHead(head, head_request);
  if (!r) return;
  BICACHE_FUZZ_CHECK(r->status >= 0 && r->status <= 999, "status outside three digits");
  for (bool keep : {true, false}) {
    const std::string out = server::front::ClientHead(*r, keep);
    const auto again = server::front::ParseResponseHead(out, head_request);
    BICACHE_FUZZ_CHECK(again.has_value(), "the client head of a parsed response does not parse");
    BICACHE_FUZZ_CHECK(again->status == r->status && again->body == r->body &&
                           again->content_length == r->content_length,
                       "the client reads a different response framing");
  }
}

void CheckChunked(std::string_view data, uint8_t seed) {
  ChunkedScanner whole;
  const size_t n_whole = whole.Feed(data);
  BICACHE_FUZZ_CHECK(n_whole <= data.size(), "the scanner took more bytes than it got");
  BICACHE_FUZZ_CHECK(!(whole.done() && whole.failed()), "the scanner both ended and failed");
  ChunkedScanner pieces;
  size_t taken = 0, at = 0;
  uint32_t state = seed | 1u;
  while (at < data.size() && !pieces.done() && !pieces.failed()) {
    state = state * 1103515245u + 12345u;
    const size_t len = std::min<size_t>(data.size() - at, 1 + (state >> 16) % 7);
    const size_t got = pieces.Feed(data.substr(at, len));
    BICACHE_FUZZ_CHECK(got <= len, "the scanner took more bytes than it got");
    taken += got;
    if (got < len) break;  // ended (or failed) inside this piece
    at += len;
  }
  BICACHE_FUZZ_CHECK(pieces.done() == whole.done() && pieces.failed() == whole.failed(),
                     "the scanner's verdict depends on how the bytes were split");
  if (whole.done()) {
    BICACHE_FUZZ_CHECK(taken == n_whole && pieces.data_bytes() == whole.data_bytes(),
                       "the body end depends on how the bytes were split");
  }
}

}  // namespace

void HttpHead(Input in) {
  if (in.empty()) return;
  const uint8_t seed = in[0];
  const std::string_view all(reinterpret_cast<const char*>(in.data()) + 1, in.size() - 1);
  const size_t end = server::front::FindHeadEnd(all);
  if (end != std::string_view::npos) {
    BICACHE_FUZZ_CHECK(end >= 2 && end <= all.size() && all[end - 1] == '\n',
                       "the head does not end on a line end");
    BICACHE_FUZZ_CHECK(server::front::FindHeadEnd(all.substr(0, end)) == end,
                       "a prefix holding the head ends elsewhere");
    BICACHE_FUZZ_CHECK(server::front::FindHeadEnd(all.substr(0, end - 1)) == std::string_view::npos,
                       "the head ends before its first blank line");
  }
  const std::string_view head = end == std::string_view::npos
                                    ? all.substr(0, server::front::kMaxHeadBytes)
                                    : all.substr(0, end);
  CheckRequestHead(head);
  CheckResponseHead(head, (seed & 0x80) != 0);
  CheckChunked(end == std::string_view::npos ? all : all.substr(end), seed);
}

}  // namespace bicache::fuzz
