// How the connection layer reads a request with Boost.Beast's parser, and which requests it refuses
// before any handler runs (server/http/session.cpp uses these; so do the framing test and the
// fuzz target, so what they check is what the server does).
//
// Refused, with the connection closed after the answer (so a client and the server never disagree
// on where the next request starts): a head over 64 KiB (431), a Content-Length that is not one
// byte count, two that differ, or one beside Transfer-Encoding (400), a Transfer-Encoding other
// than chunked (501), a body over --max-body-bytes (413: at once from its Content-Length, or when a
// chunked body passes it), malformed chunks (400), an HTTP version other than 1.0/1.1 (505),
// control characters in a header or target (400). Lines must end in CRLF.
#pragma once

#include <boost/beast/http.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http/exchange.h"

namespace bicache::server {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

inline constexpr size_t kMaxHeadBytes = 64 * 1024;

struct Refusal {
  int status = 400;
  std::string message;
  std::string code;  // OpenAI error code; "" for none
};

// A fresh parser for one request, with the head and body limits set.
void ResetParser(std::optional<RequestParser>& parser, size_t max_body_bytes);

// The refusal for an error from the parser (head or body stage). `unparsed`: the bytes the parser
// had not taken (the head, when it failed there), for quoting a bad Content-Length as sent.
Refusal RefusalFor(const boost::system::error_code& ec, size_t max_body_bytes,
                   std::string_view unparsed = {});

// Checks once the head is parsed: version, Transfer-Encoding, Content-Length against the limit.
std::optional<Refusal> CheckHead(const RequestParser& parser, size_t max_body_bytes);

// The handler's view of a parsed request (moves the body out).
HttpRequest ToHttpRequest(RequestParser& parser);

// Reads one request from `bytes`, fed to the parser `piece` bytes at a time, the way a connection
// gets it. For the framing test and the fuzz target.
struct ReadOne {
  std::optional<HttpRequest> request;  // complete and accepted
  std::optional<Refusal> refusal;      // refused
  bool expect_continue = false;        // the head asked for 100 Continue
  size_t consumed = 0;                 // bytes of `bytes` the request took
};
ReadOne ReadOneRequest(std::string_view bytes, size_t max_body_bytes, size_t piece);

}  // namespace bicache::server
