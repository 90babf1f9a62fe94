// The HTTP server's connection layer (server/http/http_server.h) with stand-in handlers, over real
// loopback sockets: kept-alive connections, deadlines (408), the connection cap (503), a client
// that leaves while its request is handled (the handler hears of it), a client that stops reading
// a stream (the producer is held back and the connection closed after the idle timeout), a handler
// that drops its request (500), and shutdown (503 on an idle kept-alive connection, then Run()
// returns).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "server/http/http_server.h"

namespace bicache::server {
namespace {

using namespace std::chrono_literals;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

void SendAll(int fd, const std::string& s) {
  ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

// Reads until `until` appears (or the peer closes, or `wait` passes); returns what came.
std::string ReadUntil(int fd, const std::string& until, std::chrono::milliseconds wait = 5s) {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + wait;
  while (got.find(until) == std::string::npos && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

bool PeerClosed(int fd, std::chrono::milliseconds wait) {
  const auto end = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 50) <= 0) continue;
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return true;
  }
  return false;
}

// A server on a free loopback port, its loop on a thread.
class Running {
 public:
  Running(ConnectionOptions o, HttpServer::Handler h) : http_(o, std::move(h)) {
    port_ = http_.Bind("127.0.0.1", 0);
    loop_ = std::thread([this] { http_.Run(); });
  }
  ~Running() { Stop(); }
  void Stop() {
    if (!loop_.joinable()) return;
    http_.BeginShutdown(0ms);
    http_.Finish(100ms);
    loop_.join();
  }
  int port() const { return port_; }
  HttpServer& http() { return http_; }

 private:
  HttpServer http_;
  int port_ = 0;
  std::thread loop_;
};

HttpServer::Handler Echo() {
  return [](std::shared_ptr<Exchange> ex) {
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = ex->request().method + " " + ex->request().path + " " + ex->request().body;
    ex->Respond(std::move(r));
  };
}

TEST(ServerHttp, KeptAliveConnectionServesRequestsInTurn) {
  Running s({}, Echo());
  const int fd = Connect(s.port());
  SendAll(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi");
  const std::string both = ReadUntil(fd, "POST /b hi");
  EXPECT_NE(both.find("GET /a "), std::string::npos);
  EXPECT_NE(both.find("POST /b hi"), std::string::npos);
  SendAll(fd, "GET /c HTTP/1.1\r\nConnection: close\r\n\r\n");
  EXPECT_NE(ReadUntil(fd, "GET /c").find("Connection: close"), std::string::npos);
  EXPECT_TRUE(PeerClosed(fd, 2s));
  close(fd);
}

TEST(ServerHttp, SlowHeadGets408AndSilentConnectionJustCloses) {
  ConnectionOptions o;
  o.header_timeout = 300ms;
  Running s(o, Echo());
  const int slow = Connect(s.port()), silent = Connect(s.port());
  SendAll(slow, "GET /a HTTP/1.1\r\nHo");
  const std::string got = ReadUntil(slow, "}", 3s);
  EXPECT_NE(got.find("408"), std::string::npos) << got;
  EXPECT_NE(got.find("--header-timeout"), std::string::npos) << got;
  EXPECT_TRUE(PeerClosed(silent, 3s));
  EXPECT_EQ(s.http().stats().timed_out, 1u);
  close(slow);
  close(silent);
}

TEST(ServerHttp, ConnectionsOverTheCapGet503) {
  ConnectionOptions o;
  o.max_connections = 1;
  Running s(o, Echo());
  const int first = Connect(s.port());
  SendAll(first, "GET /a HTTP/1.1\r\n\r\n");
  ReadUntil(first, "GET /a");  // admitted and served
  const int second = Connect(s.port());
  const std::string got = ReadUntil(second, "}", 3s);
  EXPECT_NE(got.find("503"), std::string::npos) << got;
  EXPECT_NE(got.find("too_many_connections"), std::string::npos) << got;
  EXPECT_EQ(s.http().stats().refused, 1u);
  close(first);
  close(second);
}

TEST(ServerHttp, ClientLeavingWhileHandledIsHeard) {
  std::atomic<bool> gone{false};
  std::shared_ptr<Exchange> held;
  std::atomic<bool> have{false};
  Running s({}, [&](std::shared_ptr<Exchange> ex) {
    ex->OnClientGone([&] { gone = true; });
    held = ex;  // never answered while the client is there
    have = true;
  });
  const int fd = Connect(s.port());
  SendAll(fd, "POST /slow HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  for (int i = 0; i < 200 && !have; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(have);
  EXPECT_EQ(s.http().awaiting_answers(), 1);
  close(fd);
  for (int i = 0; i < 200 && !gone; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(gone);
  held->Respond({});  // answering a departed client is harmless
  EXPECT_EQ(s.http().awaiting_answers(), 0);
}

TEST(ServerHttp, ReaderThatStopsHoldsTheProducerBackAndIsClosed) {
  ConnectionOptions o;
  o.idle_timeout = 400ms;
  std::atomic<size_t> produced{0};
  std::atomic<bool> gone{false};
  Running s(o, [&](std::shared_ptr<Exchange> ex) {
    ex->OnClientGone([&] { gone = true; });
    HttpResponse head;
    head.content_type = "text/event-stream";
    ex->BeginStream(
        head,
        [&, ex] {
          produced += 1 << 16;
          ex->Notify();  // always more
          return StreamPiece{std::string(1 << 16, 'x'), false};
        },
        ": idle\n\n");
  });
  const int fd = Connect(s.port());
  int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  SendAll(fd, "GET /stream HTTP/1.1\r\n\r\n");
  // Never read: the write stalls, and the idle timeout after it closes the connection.
  for (int i = 0; i < 1000 && !gone; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(gone);
  // Only what fits the socket buffers was produced, not seconds of a fast producer.
  EXPECT_LT(produced.load(), size_t{64} << 20);
  close(fd);
}

TEST(ServerHttp, StreamSendsPiecesThenEnds) {
  // One piece per pull; the producer says when it has more (a pull during a write is run after it).
  Running s({}, [](std::shared_ptr<Exchange> ex) {
    auto n = std::make_shared<int>(0);
    ex->BeginStream(
        {},
        [n, ex] {
          if (*n < 2) ex->Notify();
          ++*n;
          return StreamPiece{"piece" + std::to_string(*n) + ";", *n == 3};
        },
        "");
  });
  const int fd = Connect(s.port());
  SendAll(fd, "GET /s HTTP/1.1\r\n\r\n");
  const std::string got = ReadUntil(fd, "0\r\n\r\n");
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  EXPECT_NE(got.find("piece3;"), std::string::npos) << got;
  close(fd);
}

TEST(ServerHttp, SlowStreamWithoutIdlePayloadIsNotEndedByTheHeartbeat) {
  // The producer has nothing for 1.5 s (past the one-second heartbeat), then its last piece.
  Running s({}, [](std::shared_ptr<Exchange> ex) {
    auto start = std::chrono::steady_clock::now();
    ex->BeginStream(
        {},
        [start] {
          const bool late = std::chrono::steady_clock::now() - start > 1500ms;
          return late ? StreamPiece{"late;", true} : StreamPiece{};
        },
        "");
    std::thread([ex] {
      std::this_thread::sleep_for(1600ms);
      ex->Notify();
    }).detach();
  });
  const int fd = Connect(s.port());
  SendAll(fd, "GET /s HTTP/1.1\r\n\r\n");
  const std::string got = ReadUntil(fd, "0\r\n\r\n");
  EXPECT_NE(got.find("late;"), std::string::npos) << got;
  close(fd);
}

TEST(ServerHttp, DroppedRequestGets500) {
  Running s({}, [](std::shared_ptr<Exchange>) {});
  const int fd = Connect(s.port());
  SendAll(fd, "GET /a HTTP/1.1\r\n\r\n");
  const std::string got = ReadUntil(fd, "}");
  EXPECT_NE(got.find("500"), std::string::npos) << got;
  close(fd);
}

TEST(ServerHttp, ShutdownAnswersIdleConnections503ThenRunReturns) {
  HttpServer http({}, Echo());
  const int port = http.Bind("127.0.0.1", 0);
  std::thread loop([&] { http.Run(); });
  const int fd = Connect(port);
  SendAll(fd, "GET /a HTTP/1.1\r\n\r\n");
  ReadUntil(fd, "GET /a");
  http.BeginShutdown(1s);
  std::this_thread::sleep_for(50ms);
  SendAll(fd, "GET /b HTTP/1.1\r\n\r\n");
  const std::string got = ReadUntil(fd, "}");
  EXPECT_NE(got.find("503"), std::string::npos) << got;
  EXPECT_NE(got.find("Retry-After: 1"), std::string::npos) << got;
  const auto t0 = std::chrono::steady_clock::now();
  http.Finish(300ms);
  loop.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  close(fd);
}

}  // namespace
}  // namespace bicache::server
