#include "server/http/request_reading.h"

#include <algorithm>
#include <cctype>
namespace bicache::server {

namespace bhttp = boost::beast::http;

void ResetParser(std::optional<RequestParser>& parser, size_t max_body_bytes) {
  parser.emplace();
  parser->header_limit(static_cast<std::uint32_t>(kMaxHeadBytes));
  parser->body_limit(max_body_bytes);
}

namespace {

// The value of the first Content-Length line in a raw head (the parser may have taken the lines
// before it), "" when there is none.
std::string RawContentLength(std::string_view unparsed) {
  static constexpr std::string_view kName = "\ncontent-length:";
  const std::string head = "\n" + std::string(unparsed.substr(0, unparsed.find("\r\n\r\n")));
  std::string lower = head;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t at = lower.find(kName);
  if (at == std::string::npos) return "";
  size_t from = at + kName.size();
  const size_t to = std::min(head.find('\r', from), head.size());
  while (from < to && (head[from] == ' ' || head[from] == '\t')) ++from;
  return head.substr(from, std::min<size_t>(to - from, 40));
}

Refusal TooLarge(size_t max_body_bytes) {
  return {413,
          "the request body is too large (this server accepts up to " +
              std::to_string(max_body_bytes) + " bytes)",
          ""};
}

}  // namespace

Refusal RefusalFor(const boost::system::error_code& ec, size_t max_body_bytes,
                   std::string_view unparsed) {
  using E = bhttp::error;
  if (ec == E::header_limit)
    return {431, "the request head (request line and headers) is over 64 KiB", ""};
  if (ec == E::body_limit || ec == E::buffer_overflow) {
    return TooLarge(max_body_bytes);
  }
  if (const std::string sent = RawContentLength(unparsed);
      ec == E::bad_content_length && !sent.empty()) {
    return {
        400,
        "Content-Length '" + sent +
            "' is not a byte count (or it differs from another Content-Length, or stands beside "
            "Transfer-Encoding: chunked)",
        ""};
  }
  if (ec == E::bad_content_length) {
    return {400,
            "the Content-Length header is not one byte count (a negative, non-numeric or "
            "over-large value, two that differ, or one beside Transfer-Encoding: chunked)",
            ""};
  }
  if (ec == E::bad_transfer_encoding) {
    return {400, "Transfer-Encoding is given twice or beside Content-Length", ""};
  }
  if (ec == E::bad_chunk || ec == E::bad_chunk_extension)
    return {400, "the chunked request body is malformed", ""};
  if (ec == E::bad_version) {
    // Beast reads a request line ending in a bare LF as a bad version: say what is wrong.
    const size_t lf = unparsed.find('\n');
    if (lf != std::string_view::npos && (lf == 0 || unparsed[lf - 1] != '\r'))
      return {400, "a line of the request head does not end in CRLF", ""};
    return {505, "the HTTP version is not HTTP/1.0 or HTTP/1.1 (the versions served)", ""};
  }
  if (ec == E::bad_method || ec == E::bad_target) {
    return {400,
            "the request line is not 'METHOD TARGET HTTP/1.1' (a bad method, or a target with "
            "spaces or control characters)",
            ""};
  }
  if (ec == E::bad_field || ec == E::bad_value || ec == E::bad_obs_fold)
    return {400, "a header line is malformed (no colon, a bad name, or a control character)", ""};
  if (ec == E::bad_line_ending) return {400, "a line of the request head does not end in CRLF", ""};
  return {400, "the request could not be read: " + ec.message(), ""};
}

std::optional<Refusal> CheckHead(const RequestParser& parser, size_t max_body_bytes) {
  const auto& h = parser.get();
  if (h.version() != 10 && h.version() != 11) {
    return Refusal{505, "only HTTP/1.0 and HTTP/1.1 are served", ""};
  }
  // Beast reads a Transfer-Encoding whose last coding is not chunked as "no body" for a request;
  // RFC 9112 says such a body's length cannot be known: refused.
  if (const auto te = h.find(bhttp::field::transfer_encoding); te != h.end() && !parser.chunked()) {
    return Refusal{
        501, "Transfer-Encoding '" + std::string(te->value().substr(0, 60)) + "' is not supported",
        ""};
  }
  if (const auto n = parser.content_length(); n && *n > max_body_bytes) {
    return TooLarge(max_body_bytes);
  }
  return std::nullopt;
}

HttpRequest ToHttpRequest(RequestParser& parser) {
  auto& m = parser.get();
  HttpRequest r;
  r.method = std::string(m.method_string());
  const std::string target(m.target());
  r.path = target.substr(0, target.find('?'));
  for (const auto& f : m)
    r.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
  r.body = std::move(m.body());
  return r;
}

ReadOne ReadOneRequest(std::string_view bytes, size_t max_body_bytes, size_t piece) {
  ReadOne out;
  std::optional<RequestParser> parser;
  ResetParser(parser, max_body_bytes);
  piece = std::max<size_t>(piece, 1);
  std::string buffered;  // what the parser has not consumed yet (a connection's read buffer)
  // Blank lines before a request line are skipped, as Session::WaitForRequest does.
  size_t fed = std::min(bytes.find_first_not_of("\r\n"), bytes.size());
  bool head_checked = false;
  int stalls = 0;
  while (!parser->is_done()) {
    if (fed < bytes.size()) {
      const size_t n = std::min(piece, bytes.size() - fed);
      buffered.append(bytes.substr(fed, n));
      fed += n;
    }
    boost::system::error_code ec;
    const size_t used = parser->put(boost::asio::buffer(buffered), ec);
    buffered.erase(0, used);
    out.consumed = fed - buffered.size();
    // A put may take nothing and still move on (from the head to the body): only a second one
    // that takes nothing with no more bytes to give means the request is incomplete.
    stalls = used == 0 ? stalls + 1 : 0;
    if (ec == bhttp::error::need_more || (!ec && used == 0 && !parser->is_done())) {
      if (fed == bytes.size() && (ec || stalls > 1)) return out;  // incomplete
      continue;
    }
    if (ec) {
      out.refusal = RefusalFor(ec, max_body_bytes, buffered);
      return out;
    }
    if (parser->is_header_done() && !head_checked) {
      head_checked = true;
      if (auto r = CheckHead(*parser, max_body_bytes)) {
        out.refusal = std::move(r);
        return out;
      }
      out.expect_continue = parser->get()[bhttp::field::expect] == "100-continue";
    }
  }
  out.request = ToHttpRequest(*parser);
  return out;
}

}  // namespace bicache::server
