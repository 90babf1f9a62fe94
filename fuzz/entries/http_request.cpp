// Request reading of the HTTP server (server/http/request_reading.h): Beast's parser with our
// limits and checks, fed the way a connection gets bytes (in pieces of a size taken from the
// input), requests read one after another from one stream as on a kept-alive connection.
// Properties: every outcome is a request, a refusal with a 4xx/5xx status and a reason, or "need
// more" at the end of the input; an accepted body is within the limit and as long as its
// Content-Length says; a request never consumes more bytes than it was given; bytes that make a
// request in pieces of one size make the same request, ending at the same byte, in one piece
// (where a request ends cannot depend on how its bytes arrived, or a client and the server could
// disagree on where the next request starts).
//
// Input: byte 0 picks the piece size (1..64), byte 1 the body limit (16 B .. 2 KiB); the rest is
// the byte stream.
#include <string>

#include "server/http/request_reading.h"
#include "targets.h"

namespace bicache::fuzz {

void HttpRequest(Input in) {
  if (in.size() < 2) return;
  const size_t piece = 1 + in[0] % 64;
  const size_t max_body = size_t{16} << (in[1] % 8);
  const std::string stream(reinterpret_cast<const char*>(in.data()) + 2, in.size() - 2);
  size_t at = 0;
  for (int n = 0; n < 8 && at < stream.size(); ++n) {
    const std::string_view rest = std::string_view(stream).substr(at);
    const server::ReadOne r = server::ReadOneRequest(rest, max_body, piece);
    const server::ReadOne whole = server::ReadOneRequest(rest, max_body, rest.size());
    BICACHE_FUZZ_CHECK(r.consumed <= rest.size(), "a request consumed more bytes than it got");
    // A request one way is a request the other way. (A refusal may meet "need more" the other way:
    // Beast finds a head with bare LF line ends bad only when it has the whole line.)
    BICACHE_FUZZ_CHECK(!(r.request && whole.refusal) && !(r.refusal && whole.request),
                       "a request one way is refused the other way");
    if (r.refusal) {
      BICACHE_FUZZ_CHECK(r.refusal->status >= 400 && r.refusal->status < 600,
                         "refused without an error status");
      BICACHE_FUZZ_CHECK(!r.refusal->message.empty(), "refused without a reason");
      return;  // the connection closes after a refusal
    }
    if (!r.request) return;  // the input ended inside a request
    BICACHE_FUZZ_CHECK(
        whole.request && r.consumed == whole.consumed && r.request->body == whole.request->body,
        "where a request ends depends on the piece size");
    BICACHE_FUZZ_CHECK(r.request->body.size() <= max_body, "a body over the limit was accepted");
    const std::string length = r.request->header("Content-Length");
    if (!length.empty() && r.request->header("Transfer-Encoding").empty()) {
      BICACHE_FUZZ_CHECK(r.request->body.size() == std::stoull(length.substr(0, length.find(','))),
                         "the body is not as long as its Content-Length");
    }
    BICACHE_FUZZ_CHECK(r.consumed > 0, "a request consumed no bytes");
    at += r.consumed;
  }
}

}  // namespace bicache::fuzz
