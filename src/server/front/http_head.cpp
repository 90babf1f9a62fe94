#include "server/front/http_head.h"

#include <cctype>

namespace bicache::server::front {
namespace {

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// True when the comma-separated list `value` holds `token` (case-insensitive).
bool ListHas(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (EqualsNoCase(item, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// True when `s` holds a control byte (below 0x20 but tab, or DEL): a bare CR or a NUL inside a
// field is read differently by different parsers (RFC 9110 5.5: reject it).
bool HasControlByte(std::string_view s) {
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return true;
  }
  return false;
}

// Splits a head into lines (without their ends), stopping at the blank line.
std::vector<std::string_view> Lines(std::string_view head) {
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const size_t lf = head.find('\n');
    std::string_view line = head.substr(0, lf);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) break;
    lines.push_back(line);
    if (lf == std::string_view::npos) break;
    head.remove_prefix(lf + 1);
  }
  return lines;
}

// Header lines (all but the first) -> headers; false on a line without "name:".
bool ParseHeaders(const std::vector<std::string_view>& lines, std::vector<Header>* out) {
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == 0 || colon == std::string_view::npos) return false;
    const std::string_view name = lines[i].substr(0, colon);
    for (char c : name)
      if (!IsTokenChar(c)) return false;
    out->push_back({std::string(name), std::string(Trim(lines[i].substr(colon + 1)))});
  }
  return true;
}

HeadError Bad(std::string message) {
  return HeadError{400, std::move(message)};
}

// Content-Length and Transfer-Encoding -> the body's framing, or the reason they cannot be trusted.
std::optional<HeadError> Framing(RequestHead* h) {
  bool has_length = false, chunked = false;
  for (const Header& x : h->headers) {
    if (EqualsNoCase(x.name, "Content-Length")) {
      if (x.value.empty() || x.value.size() > 18 ||
          x.value.find_first_not_of("0123456789") != std::string::npos) {
        return Bad("Content-Length '" + x.value.substr(0, 40) + "' is not a byte count");
      }
      const uint64_t n = std::stoull(x.value);
      if (has_length && n != h->content_length)
        return Bad("the request has two different Content-Length headers");
      has_length = true;
      h->content_length = n;
    } else if (EqualsNoCase(x.name, "Transfer-Encoding")) {
      if (chunked || !EqualsNoCase(Trim(x.value), "chunked")) {
        return HeadError{501, "Transfer-Encoding '" + x.value.substr(0, 40) +
                                  "' is not supported (only chunked)"};
      }
      chunked = true;
    }
  }
  if (has_length && chunked)
    return Bad("the request has both Content-Length and Transfer-Encoding");
  h->body = chunked                               ? BodyKind::kChunked
            : has_length && h->content_length > 0 ? BodyKind::kLength
                                                  : BodyKind::kNone;
  return std::nullopt;
}

}  // namespace

size_t FindHeadEnd(std::string_view buf) {
  for (size_t i = buf.find('\n'); i != std::string_view::npos; i = buf.find('\n', i + 1)) {
    if (i + 1 < buf.size() && buf[i + 1] == '\n') return i + 2;
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

std::variant<RequestHead, HeadError> ParseRequestHead(std::string_view head) {
  const std::vector<std::string_view> lines = Lines(head);
  if (lines.empty()) return Bad("the request line is missing");
  RequestHead h;
  const std::string_view first = lines[0];
  const size_t sp1 = first.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : first.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp1 == 0 || sp2 == sp1 + 1 ||
      first.find(' ', sp2 + 1) != std::string_view::npos) {
    return Bad("the request line is not 'METHOD TARGET HTTP/1.1'");
  }
  h.method = first.substr(0, sp1);
  h.target = first.substr(sp1 + 1, sp2 - sp1 - 1);
  h.version = first.substr(sp2 + 1);
  for (char c : h.method)
    if (!IsTokenChar(c)) return Bad("the request line is not 'METHOD TARGET HTTP/1.1'");
  if (h.version != "HTTP/1.1" && h.version != "HTTP/1.0") {
    return HeadError{505, "HTTP version '" + h.version.substr(0, 20) +
                              "' is not supported (HTTP/1.0 and HTTP/1.1 are)"};
  }
  if (HasControlByte(h.target)) return Bad("the request target holds a control character");
  if (!ParseHeaders(lines, &h.headers)) {
    return Bad("the request could not be parsed: a header line without a name and a colon");
  }
  for (const Header& x : h.headers) {
    if (HasControlByte(x.value))
      return Bad("header '" + x.name.substr(0, 40) + "' holds a control character");
  }
  if (auto e = Framing(&h)) return *e;
  bool close = false, keep = false;
  for (const Header& x : h.headers) {
    if (EqualsNoCase(x.name, "Connection")) {
      close = close || ListHas(x.value, "close");
      keep = keep || ListHas(x.value, "keep-alive");
    } else if (EqualsNoCase(x.name, "Expect")) {
      h.expect_continue = EqualsNoCase(x.value, "100-continue");
    }
  }
  h.keep_alive = !close && (h.version == "HTTP/1.1" || keep);
  return h;
}

std::string UpstreamHead(const RequestHead& h, const std::string& relay) {
  std::string out = h.method + " " + h.target + " " + h.version + "\r\n";
  for (const Header& x : h.headers) {
    if (EqualsNoCase(x.name, "Connection") || EqualsNoCase(x.name, "Keep-Alive") ||
        EqualsNoCase(x.name, "Proxy-Connection") || EqualsNoCase(x.name, "Expect") ||
        EqualsNoCase(x.name, kRelayHeader))
      continue;
    out += x.name + ": " + x.value + "\r\n";
  }
  if (!relay.empty()) out += std::string(kRelayHeader) + ": " + relay + "\r\n";
  if (h.body == BodyKind::kNone) {
    bool has_length = false;
    for (const Header& x : h.headers)
      has_length = has_length || EqualsNoCase(x.name, "Content-Length");
    if (!has_length) out += "Content-Length: 0\r\n";
  }
  out += "Connection: close\r\n\r\n";
  return out;
}

std::optional<ResponseHead> ParseResponseHead(std::string_view head, bool head_request) {
  const std::vector<std::string_view> lines = Lines(head);
  if (lines.empty() || lines[0].substr(0, 5) != "HTTP/" || lines[0].size() < 12)
    return std::nullopt;
  ResponseHead r;
  r.status_line = lines[0];
  const std::string_view code = lines[0].substr(9, 3);
  if (code.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  r.status = std::stoi(std::string(code));
  if (!ParseHeaders(lines, &r.headers)) return std::nullopt;
  bool has_length = false, chunked = false;
  for (const Header& x : r.headers) {
    if (EqualsNoCase(x.name, "Content-Length") && !x.value.empty() && x.value.size() <= 18 &&
        x.value.find_first_not_of("0123456789") == std::string::npos) {
      has_length = true;
      r.content_length = std::stoull(x.value);
    } else if (EqualsNoCase(x.name, "Transfer-Encoding") && ListHas(x.value, "chunked")) {
      chunked = true;
    }
  }
  const bool no_body = head_request || r.status < 200 || r.status == 204 || r.status == 304;
  r.body = no_body      ? BodyKind::kNone
           : chunked    ? BodyKind::kChunked
           : has_length ? (r.content_length > 0 ? BodyKind::kLength : BodyKind::kNone)
                        : BodyKind::kUntilClose;
  return r;
}

std::string ClientHead(const ResponseHead& h, bool keep_alive) {
  std::string out = h.status_line + "\r\n";
  for (const Header& x : h.headers) {
    if (EqualsNoCase(x.name, "Connection") || EqualsNoCase(x.name, "Keep-Alive")) continue;
    out += x.name + ": " + x.value + "\r\n";
  }
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

void ChunkedScanner::EndSizeLine() {
  if (digits_ == 0) {
    state_ = State::kError;
  } else if (size_ == 0) {
    state_ = State::kTrailerStart;
  } else {
    state_ = State::kData;
  }
}

size_t ChunkedScanner::Feed(std::string_view data) {
  size_t i = 0;
  while (i < data.size() && state_ != State::kDone && state_ != State::kError) {
    const char c = data[i];
    switch (state_) {
      case State::kSize:
        if (std::isxdigit(static_cast<unsigned char>(c))) {
          if (++digits_ > 12) {  // 2^48 bytes: no body this server takes comes near
            state_ = State::kError;
            break;
          }
          size_ = size_ * 16 + (std::isdigit(static_cast<unsigned char>(c))
                                    ? c - '0'
                                    : std::tolower(static_cast<unsigned char>(c)) - 'a' + 10);
        } else if (c == ';' || c == ' ' || c == '\t') {
          state_ = State::kExtension;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (c == '\n') {
          EndSizeLine();
        } else {
          state_ = State::kError;
        }
        ++i;
        break;
      case State::kExtension:
        if (c == '\r') state_ = State::kSizeLf;
        if (c == '\n') EndSizeLine();
        ++i;
        break;
      case State::kSizeLf:
        if (c == '\n') {
          EndSizeLine();
        } else {
          state_ = State::kError;
        }
        ++i;
        break;
      case State::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(size_, data.size() - i));
        size_ -= n;
        data_bytes_ += n;
        i += n;
        if (size_ == 0) state_ = State::kDataCr;
        break;
      }
      case State::kDataCr:
        state_ = c == '\r' ? State::kDataLf : c == '\n' ? State::kSize : State::kError;
        digits_ = 0;
        ++i;
        break;
      case State::kDataLf:
        state_ = c == '\n' ? State::kSize : State::kError;
        ++i;
        break;
      case State::kTrailerStart:
        state_ = c == '\r' ? State::kEndLf : c == '\n' ? State::kDone : State::kTrailerLine;
        ++i;
        break;
      case State::kTrailerLine:
        if (c == '\n') state_ = State::kTrailerStart;
        ++i;
        break;
      case State::kEndLf:
        state_ = c == '\n' ? State::kDone : State::kError;
        ++i;
        break;
      case State::kDone:
      case State::kError:
        break;
    }
  }
  return i;
}

}  // namespace bicache::server::front
