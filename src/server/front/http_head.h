// HTTP/1.x message heads for the connection front end (server/front/front_end.h): where a head
// ends, what a request head says about its body, the heads re-written for the upstream and for the
// client, and the framing of a chunked body. Bytes in, values out: no sockets, so every rule here
// is unit-tested alone (tests/server_request_framing_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace bicache::server::front {

// A request head (request line + header lines + blank line) larger than this is refused (431).
inline constexpr size_t kMaxHeadBytes = 64 * 1024;

// Offset one past the blank line that ends the head at the start of `buf` ("\r\n\r\n", or a bare
// "\n\n"), or std::string_view::npos while it has not arrived.
size_t FindHeadEnd(std::string_view buf);

// How a message's body is delimited.
enum class BodyKind { kNone, kLength, kChunked, kUntilClose };

struct Header {
  std::string name, value;  // value without surrounding blanks
};

struct RequestHead {
  std::string method, target, version;  // version: "HTTP/1.0" or "HTTP/1.1"
  std::vector<Header> headers;
  BodyKind body = BodyKind::kNone;  // kNone, kLength or kChunked (a request has no kUntilClose)
  uint64_t content_length = 0;      // kLength only
  bool keep_alive = true;           // the client allows another request on this connection
  bool expect_continue = false;     // "Expect: 100-continue"
};

// A head the front answers itself, with this status and message, and then closes.
struct HeadError {
  int status = 400;
  std::string message;
};

// Parses a request head (through its blank line, as FindHeadEnd delimits it). A HeadError for: a
// request line that is not METHOD TARGET HTTP/1.x, a header line without a name and colon, a
// control character (a bare CR, a NUL, ...; tab is allowed) in the target or a header value, a
// Content-Length that is not a byte count or that disagrees with another, Content-Length together
// with Transfer-Encoding, and a Transfer-Encoding other than chunked (the ways a proxy and its
// upstream can be made to read different bodies).
std::variant<RequestHead, HeadError> ParseRequestHead(std::string_view head);

// The header naming the front end's end of the connection that carries a request to the upstream
// (server/connection_watch.h). A client's own header of this name never reaches the upstream.
inline constexpr const char* kRelayHeader = "X-Bicache-Relay";

// The head as the upstream gets it: the same request line and headers minus the hop-by-hop ones
// (Connection, Keep-Alive, Proxy-Connection, Expect: the front answered 100-continue itself) and
// any kRelayHeader, plus "kRelayHeader: relay" (when not empty), "Content-Length: 0" for a request
// without a body (RFC 9112, 6.3: none was sent; cpp-httplib would otherwise refuse a POST as
// unparsable) and "Connection: close" (one request per upstream connection).
std::string UpstreamHead(const RequestHead& h, const std::string& relay = "");

struct ResponseHead {
  int status = 0;
  std::string status_line;  // "HTTP/1.1 200 OK", without the line end
  std::vector<Header> headers;
  BodyKind body = BodyKind::kUntilClose;
  uint64_t content_length = 0;
};

// Parses the upstream's response head; nullopt when it is not one. `head_request`: the request was
// HEAD (no body follows whatever the headers say).
std::optional<ResponseHead> ParseResponseHead(std::string_view head, bool head_request);

// The response head as the client gets it: the upstream's minus Connection and Keep-Alive, plus
// "Connection: keep-alive" or "Connection: close".
std::string ClientHead(const ResponseHead& h, bool keep_alive);

// Follows the framing of a chunked body fed in pieces (size line, data, CRLF, ..., last chunk,
// trailers, blank line) and says where it ends. Only the framing: the bytes are relayed as they
// came and the upstream decodes them.
class ChunkedScanner {
 public:
  // Takes bytes from the front of `data` up to the end of the body; returns how many belong to it.
  size_t Feed(std::string_view data);
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  uint64_t data_bytes() const { return data_bytes_; }  // payload so far, without the framing

 private:
  enum class State {
    kSize,
    kExtension,
    kSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kTrailerStart,
    kTrailerLine,
    kEndLf,
    kDone,
    kError
  };
  void EndSizeLine();
  State state_ = State::kSize;
  uint64_t size_ = 0;  // the chunk size being read, then the data left in the chunk
  int digits_ = 0;
  uint64_t data_bytes_ = 0;
};

}  // namespace bicache::server::front
