// The front end's reading of HTTP heads and bodies (server/front/http_head.h): where a head ends,
// which heads are refused and why (the ways a proxy and its upstream could be made to disagree on
// where a body ends among them), the heads as the upstream and the client get them, and chunked
// framing fed in pieces of every size.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "server/front/http_head.h"

namespace bicache::server::front {
namespace {

RequestHead Parse(const std::string& head) {
  auto r = ParseRequestHead(head);
  EXPECT_TRUE(std::holds_alternative<RequestHead>(r))
      << (std::holds_alternative<HeadError>(r) ? std::get<HeadError>(r).message : "");
  return std::holds_alternative<RequestHead>(r) ? std::get<RequestHead>(r) : RequestHead();
}

HeadError Refused(const std::string& head) {
  auto r = ParseRequestHead(head);
  EXPECT_TRUE(std::holds_alternative<HeadError>(r)) << head;
  return std::holds_alternative<HeadError>(r) ? std::get<HeadError>(r) : HeadError();
}

TEST(ServerRequestFraming, HeadEndsAtTheFirstBlankLine) {
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: x\r\n"), std::string_view::npos);
  const std::string h = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(FindHeadEnd(h + "body"), h.size());
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\nHost: x\n\nrest"), 24u);
}

TEST(ServerRequestFraming, RequestLineHeadersAndKeepAlive) {
  const RequestHead h = Parse(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n"
      "Expect: 100-continue\r\n\r\n");
  EXPECT_EQ(h.method, "POST");
  EXPECT_EQ(h.target, "/v1/completions");
  EXPECT_EQ(h.body, BodyKind::kLength);
  EXPECT_EQ(h.content_length, 12u);
  EXPECT_TRUE(h.keep_alive);
  EXPECT_TRUE(h.expect_continue);
  EXPECT_FALSE(Parse("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n").keep_alive);
  EXPECT_FALSE(Parse("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(Parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").body, BodyKind::kNone);
  EXPECT_EQ(Parse("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").body,
            BodyKind::kChunked);
}

TEST(ServerRequestFraming, RefusedHeadsSayWhy) {
  EXPECT_NE(Refused("GET /\r\n\r\n").message.find("METHOD TARGET"), std::string::npos);
  EXPECT_EQ(Refused("GET / HTTP/2.0\r\n\r\n").status, 505);
  EXPECT_NE(Refused("GET / HTTP/1.1\r\nno colon here\r\n\r\n").message.find("colon"),
            std::string::npos);
  const HeadError negative = Refused("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n");
  EXPECT_EQ(negative.status, 400);
  EXPECT_NE(negative.message.find("Content-Length '-1' is not a byte count"), std::string::npos);
  EXPECT_EQ(Refused("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n").status, 400);
  // Two lengths, or a length with chunked: a proxy and its upstream could read different bodies.
  EXPECT_NE(Refused("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n")
                .message.find("two different"),
            std::string::npos);
  Parse("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n");
  Refused("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
  EXPECT_EQ(Refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").status, 501);
  // A bare CR or a NUL inside a field: another parser could split the line there and read a
  // Content-Length the front never saw. Tab and bytes >= 0x80 stay allowed.
  const HeadError cr = Refused("POST / HTTP/1.1\r\nX-A: a\rContent-Length: 5\r\n\r\n");
  EXPECT_EQ(cr.status, 400);
  EXPECT_NE(cr.message.find("header 'X-A' holds a control character"), std::string::npos);
  const std::string nul = std::string("GET / HTTP/1.1\r\nX-A: a") + '\0' + "b\r\n\r\n";
  EXPECT_EQ(Refused(nul).status, 400);
  EXPECT_NE(Refused("GET /a\rb HTTP/1.1\r\n\r\n").message.find("target"), std::string::npos);
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\nX-A: a\tb \xc3\xa9\r\n\r\n").headers.at(0).value,
            "a\tb \xc3\xa9");
}

TEST(ServerRequestFraming, UpstreamHeadDropsHopByHopHeaders) {
  const RequestHead h = Parse(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n"
      "Expect: 100-continue\r\nContent-Length: 2\r\nAuthorization: Bearer k\r\n\r\n");
  EXPECT_EQ(UpstreamHead(h),
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
            "Authorization: Bearer k\r\nConnection: close\r\n\r\n");
}

TEST(ServerRequestFraming, UpstreamHeadNamesTheRelayAndDropsAClientsOwn) {
  const RequestHead h = Parse(
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nx-bicache-relay: forged\r\n"
      "Content-Length: 2\r\n\r\n");
  EXPECT_EQ(UpstreamHead(h, "0a1b2"),
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
            "X-Bicache-Relay: 0a1b2\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(UpstreamHead(h).find("forged"), std::string::npos);
}

TEST(ServerRequestFraming, UpstreamHeadGivesABodilessRequestContentLengthZero) {
  // No Content-Length and no Transfer-Encoding: the body is empty (RFC 9112, 6.3), said so to the
  // upstream, which would otherwise refuse a POST as unparsable.
  EXPECT_EQ(UpstreamHead(Parse("POST /health HTTP/1.1\r\nHost: x\r\n\r\n")),
            "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  // One sent by the client is not repeated.
  EXPECT_EQ(UpstreamHead(Parse("POST /a HTTP/1.1\r\nContent-Length: 0\r\n\r\n")),
            "POST /a HTTP/1.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

TEST(ServerRequestFraming, ResponseBodyKinds) {
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n";
  auto r = ParseResponseHead(ok, false);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, BodyKind::kLength);
  EXPECT_EQ(ClientHead(*r, true),
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(ParseResponseHead(ok, true)->body, BodyKind::kNone);  // a HEAD request
  EXPECT_EQ(ParseResponseHead("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false)->body,
            BodyKind::kChunked);
  EXPECT_EQ(ParseResponseHead("HTTP/1.1 200 OK\r\n\r\n", false)->body, BodyKind::kUntilClose);
  EXPECT_EQ(ParseResponseHead("HTTP/1.1 204 No Content\r\n\r\n", false)->body, BodyKind::kNone);
  EXPECT_FALSE(ParseResponseHead("garbage\r\n\r\n", false).has_value());
}

TEST(ServerRequestFraming, ChunkedBodyEndFoundInAnyPieces) {
  const std::string body = "5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n";
  const std::string next = "GET / HTTP/1.1\r\n";
  for (size_t piece = 1; piece <= body.size() + next.size(); ++piece) {
    ChunkedScanner s;
    const std::string all = body + next;
    size_t used = 0;
    for (size_t at = 0; at < all.size() && !s.done(); at += piece) {
      const size_t n = std::min(piece, all.size() - at);
      used += s.Feed(std::string_view(all).substr(at, n));
    }
    EXPECT_TRUE(s.done()) << "piece " << piece;
    EXPECT_EQ(used, body.size()) << "piece " << piece;
    EXPECT_EQ(s.data_bytes(), 15u);
  }
}

TEST(ServerRequestFraming, MalformedChunkedBodies) {
  for (const char* bad : {"x\r\n", "5\r\nhelloX", "\r\n", "1234567890abcdef\r\n"}) {
    ChunkedScanner s;
    s.Feed(bad);
    EXPECT_TRUE(s.failed()) << bad;
  }
  ChunkedScanner unfinished;
  unfinished.Feed("5\r\nhel");
  EXPECT_FALSE(unfinished.done());
  EXPECT_FALSE(unfinished.failed());
}

}  // namespace
}  // namespace bicache::server::front
