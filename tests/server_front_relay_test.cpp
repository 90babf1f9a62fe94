// The connection front end (server/front/front_end.h) against a stand-in upstream on a Unix-domain
// socket, as `bicache serve` runs it: each request reaches the upstream over its own connection,
// named in the X-Bicache-Relay header (a client cannot forge that header), so the handler finds its
// socket (server/connection_watch.h) and sees the client leave; while shutting down, a request sent
// on an idle kept-alive connection gets 503 rather than a silent close (docs/serving.md), and the
// connection closes at the end of the flush. Waits are bounded (seconds); nothing asserts on speed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/connection_watch.h"
#include "server/front/front_end.h"
#include "server/front/sockets.h"

namespace bicache::server::front {
namespace {

using namespace std::chrono_literals;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{10, 0};  // no read in these tests waits longer
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& s) {
  ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

// Reads one Content-Length-framed response (or until the connection ends); "" when none came.
std::string ReadResponse(int fd) {
  std::string got;
  char buf[4096];
  for (;;) {
    const size_t end = got.find("\r\n\r\n");
    if (end != std::string::npos) {
      const size_t at = got.find("Content-Length: ");
      const size_t len = at == std::string::npos ? 0 : std::stoul(got.substr(at + 16));
      if (got.size() >= end + 4 + len) return got;
    }
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return got;
    got.append(buf, static_cast<size_t>(n));
  }
}

// Stand-in for cpp-httplib: reads each connection's request head, records it, and answers "ok"
// ("/hold": only once the front end has closed the connection, like a handler watching it). For
// each request it also looks up its connection through the relay header, as the server's handlers
// do.
class Upstream {
 public:
  Upstream() : listen_(ListenUnix(dir_.socket_path())), acceptor_([this] { AcceptLoop(); }) {}
  ~Upstream() {
    shutdown(listen_, SHUT_RDWR);
    close(listen_);
    acceptor_.join();
    for (auto& t : handlers_) t.join();
  }
  const std::string& path() const { return dir_.socket_path(); }
  std::vector<std::string> heads() {
    std::lock_guard<std::mutex> l(mutex_);
    return heads_;
  }
  int found_own_socket() const { return found_; }  // requests whose watch found their socket
  bool hold_saw_gone() const { return hold_saw_gone_; }

 private:
  void AcceptLoop() {
    for (;;) {
      const int fd = accept(listen_, nullptr, nullptr);
      if (fd < 0) return;
      handlers_.emplace_back([this, fd] { Handle(fd); });
    }
  }
  void Handle(int fd) {
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) head += c;
    {
      std::lock_guard<std::mutex> l(mutex_);
      heads_.push_back(head);
    }
    httplib::Request req;
    const size_t at = head.find(std::string(kRelayHeader) + ": ");
    if (at != std::string::npos) {
      const size_t from = at + std::strlen(kRelayHeader) + 2;
      req.set_header(kRelayHeader, head.substr(from, head.find("\r\n", from) - from));
    }
    const auto watch = ConnectionWatch::Find(req);
    if (watch && watch->fd() == fd) ++found_;
    if (head.rfind("GET /hold ", 0) == 0 && watch) {
      for (int i = 0; i < 500 && !watch->PeerGone(); ++i) std::this_thread::sleep_for(10ms);
      hold_saw_gone_ = watch->PeerGone();
    }
    const std::string r = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    send(fd, r.data(), r.size(), MSG_NOSIGNAL);
    close(fd);
  }

  PrivateSocketDir dir_;
  int listen_;
  std::mutex mutex_;
  std::vector<std::string> heads_;
  std::atomic<int> found_{0};
  std::atomic<bool> hold_saw_gone_{false};
  std::vector<std::thread> handlers_;  // touched by the acceptor thread only, joined after it
  std::thread acceptor_;
};

class FrontRelay : public ::testing::Test {
 protected:
  void SetUp() override {
    front_ = std::make_unique<FrontEnd>(FrontOptions{});
    port_ = front_->Bind("127.0.0.1", 0);
    front_->SetUpstream(upstream_.path());
    loop_ = std::thread([this] { front_->Run(); });
  }
  void TearDown() override {
    if (loop_.joinable()) {
      front_->BeginShutdown(0ms);
      front_->Finish(100ms);
      loop_.join();
    }
  }

  Upstream upstream_;
  std::unique_ptr<FrontEnd> front_;
  std::thread loop_;
  int port_ = 0;
};

TEST_F(FrontRelay, NamesEachRelayConnectionAndDropsAClientsRelayHeader) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /a HTTP/1.1\r\nHost: x\r\nX-Bicache-Relay: forged\r\n\r\n");
  EXPECT_EQ(ReadResponse(fd).substr(0, 15), "HTTP/1.1 200 OK");
  SendAll(fd, "POST /b HTTP/1.1\r\nHost: x\r\n\r\n");  // no body, no Content-Length
  EXPECT_EQ(ReadResponse(fd).substr(0, 15), "HTTP/1.1 200 OK");
  close(fd);
  const std::vector<std::string> heads = upstream_.heads();
  ASSERT_EQ(heads.size(), 2u);
  for (const std::string& h : heads) {
    EXPECT_EQ(h.find("forged"), std::string::npos) << h;
    EXPECT_NE(h.find(std::string(kRelayHeader) + ": "), std::string::npos) << h;
  }
  EXPECT_NE(heads[1].find("Content-Length: 0\r\n"), std::string::npos) << heads[1];
  // Each handler found its own socket from the header.
  EXPECT_EQ(upstream_.found_own_socket(), 2);
}

TEST_F(FrontRelay, AClientThatLeavesIsSeenByItsHandler) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
  for (int i = 0; i < 500 && upstream_.heads().empty(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(upstream_.heads().size(), 1u);
  close(fd);
  for (int i = 0; i < 500 && !upstream_.hold_saw_gone(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(upstream_.hold_saw_gone());
}

TEST_F(FrontRelay, ShutdownAnswersARequestOnAnIdleConnectionWith503) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ReadResponse(fd).substr(0, 15), "HTTP/1.1 200 OK");
  // The connection is now idle between requests. Shutdown begins; the request comes after.
  front_->BeginShutdown(0ms);
  std::this_thread::sleep_for(50ms);
  EXPECT_LT(Connect(port_), 0);  // the public socket is closed
  SendAll(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string r = ReadResponse(fd);
  EXPECT_EQ(r.substr(0, 12), "HTTP/1.1 503") << r;
  EXPECT_NE(r.find("shutting down"), std::string::npos) << r;
  EXPECT_EQ(upstream_.heads().size(), 1u);  // the upstream never saw it
  close(fd);
}

TEST_F(FrontRelay, AnIdleConnectionIsClosedAtTheEndOfTheFlush) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  SendAll(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(ReadResponse(fd).substr(0, 15), "HTTP/1.1 200 OK");
  front_->BeginShutdown(0ms);
  front_->Finish(200ms);
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0);  // closed by the server (bounded: SO_RCVTIMEO 10 s)
  loop_.join();
  close(fd);
}

}  // namespace
}  // namespace bicache::server::front
