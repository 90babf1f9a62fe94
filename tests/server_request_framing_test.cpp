// The HTTP server's reading of requests (server/http/request_reading.h): Beast's parser with our
// limits and checks, fed in pieces of every size as a connection gets them. Which requests are
// refused and why (the ways a client and the server could be made to disagree on where a body
// ends among them), and where one request ends and the next begins.
#include <gtest/gtest.h>

#include <string>

#include "server/http/request_reading.h"

namespace bicache::server {
namespace {

constexpr size_t kLimit = 1000;

HttpRequest Accepted(const std::string& bytes, size_t piece = 1 << 20) {
  const ReadOne r = ReadOneRequest(bytes, kLimit, piece);
  EXPECT_TRUE(r.request.has_value()) << bytes << (r.refusal ? " -> " + r.refusal->message : "");
  return r.request.value_or(HttpRequest());
}

Refusal Refused(const std::string& bytes) {
  const ReadOne r = ReadOneRequest(bytes, kLimit, 1 << 20);
  EXPECT_TRUE(r.refusal.has_value()) << bytes;
  return r.refusal.value_or(Refusal{0, "", ""});
}

TEST(ServerRequestFraming, MethodPathHeadersAndBody) {
  const HttpRequest r = Accepted(
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
      "Authorization: Bearer k\r\n\r\nhello");
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/completions");
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(r.header("authorization"), "Bearer k");
  EXPECT_EQ(r.header("X-None"), "");
  // No Content-Length and no Transfer-Encoding: an empty body (RFC 9112, 6.3).
  EXPECT_EQ(Accepted("POST /health HTTP/1.1\r\nHost: x\r\n\r\n").body, "");
  // Blank lines before a request line are skipped (RFC 9112, 2.2).
  EXPECT_EQ(Accepted("\r\n\r\nGET /health HTTP/1.1\r\n\r\n").path, "/health");
  EXPECT_EQ(Accepted("GET / HTTP/1.1\r\nX-A: a\tb \xc3\xa9\r\n\r\n").header("X-A"),
            "a\tb \xc3\xa9");
  EXPECT_TRUE(ReadOneRequest("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
                             kLimit, 64)
                  .expect_continue);
}

TEST(ServerRequestFraming, ChunkedBodiesInPiecesOfEverySize) {
  const std::string head = "POST /a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\nTrailer: x\r\n\r\n";
  const std::string next = "GET /b HTTP/1.1\r\n\r\n";
  const std::string all = head + body + next;
  for (size_t piece = 1; piece <= all.size(); ++piece) {
    const ReadOne r = ReadOneRequest(all, kLimit, piece);
    ASSERT_TRUE(r.request.has_value()) << "piece " << piece;
    EXPECT_EQ(r.request->body, "hello0123456789") << "piece " << piece;
    EXPECT_EQ(r.consumed, head.size() + body.size()) << "piece " << piece;
    EXPECT_EQ(Accepted(all.substr(r.consumed), piece).path, "/b");
  }
}

TEST(ServerRequestFraming, UnfinishedRequestsWaitForMore) {
  for (const std::string part : {"GET / HTTP/1.1\r\nHost: x\r\n",
                                 "POST / HTTP/1.1\r\n"
                                 "Content-Length: 5\r\n\r\nhel",
                                 "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"}) {
    const ReadOne r = ReadOneRequest(part, kLimit, 3);
    EXPECT_FALSE(r.request.has_value()) << part;
    EXPECT_FALSE(r.refusal.has_value()) << part;
  }
}

TEST(ServerRequestFraming, RefusedRequestsSayWhy) {
  EXPECT_EQ(Refused("GET / HTTP/2.0\r\n\r\n").status, 505);
  EXPECT_NE(Refused("GET / HTTP/1.1\nHost: x\n\n").message.find("CRLF"), std::string::npos);
  EXPECT_NE(Refused("GET /\r\n\r\n").message.find("METHOD TARGET"), std::string::npos);
  EXPECT_NE(Refused("GET / HTTP/1.1\r\nno colon here\r\n\r\n").message.find("colon"),
            std::string::npos);
  for (const char* length : {"-1", "abc", "99999999999999999999999", "3, 4"}) {
    const Refusal r =
        Refused(std::string("POST / HTTP/1.1\r\nContent-Length: ") + length + "\r\n\r\n");
    EXPECT_EQ(r.status, 400) << length;
    EXPECT_NE(r.message.find("Content-Length"), std::string::npos) << length;
  }
  // Two lengths that differ, or a length beside chunked: a proxy in front and this server could
  // read different bodies.
  EXPECT_EQ(Refused("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n").status,
            400);
  EXPECT_EQ(Accepted("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc").body,
            "abc");
  EXPECT_EQ(
      Refused("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n").status,
      400);
  EXPECT_EQ(
      Refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n").status,
      400);
  EXPECT_EQ(Refused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n").status, 501);
  // A bare CR or a NUL inside a field: another parser could split the line there.
  EXPECT_EQ(Refused("POST / HTTP/1.1\r\nX-A: a\rContent-Length: 5\r\n\r\n").status, 400);
  EXPECT_EQ(Refused(std::string("GET / HTTP/1.1\r\nX-A: a") + '\0' + "b\r\n\r\n").status, 400);
  EXPECT_EQ(Refused("GET /a\rb HTTP/1.1\r\n\r\n").status, 400);
  EXPECT_EQ(Refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nx\r\n").status, 400);
}

TEST(ServerRequestFraming, LimitsOnHeadAndBody) {
  const std::string big(kMaxHeadBytes, 'a');
  EXPECT_EQ(Refused("GET / HTTP/1.1\r\nX-Big: " + big + "\r\n\r\n").status, 431);
  // Over the body limit: at once from the Content-Length, before any of the body.
  const Refusal r = Refused("POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n");
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.message.find("up to 1000 bytes"), std::string::npos);
  // A chunked body when it passes the limit.
  const std::string chunk(600, 'x');
  const std::string two = "258\r\n" + chunk + "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n";
  EXPECT_EQ(Refused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + two).status, 413);
  EXPECT_EQ(Accepted("POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'y'))
                .body.size(),
            1000u);
}

}  // namespace
}  // namespace bicache::server
