// The connection front end (server/front/front_end.h) with clients that read their response slowly
// or not at all, against a stand-in upstream that answers with a large body: the front holds at
// most its buffer for such a client and stops reading the upstream (so the handler's writes wait
// instead of the whole body piling up in memory), every byte still arrives in order once the client
// reads, other clients are served meanwhile, and a client that stops reading is closed after
// --idle-timeout together with its upstream connection (whose handler then sees its write fail).
// Waits are bounded (seconds); nothing asserts on speed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/front/front_end.h"
#include "server/front/sockets.h"

namespace bicache::server::front {
namespace {

using namespace std::chrono_literals;

// Far more than the socket buffers on the way can hold (loopback autotuning: up to tcp_rmem's and
// tcp_wmem's maxima, 32 + 4 MiB here, plus the front's 256 KiB).
constexpr size_t kBigBody = 128u << 20;

char PatternByte(size_t i) {
  return static_cast<char>((i * 7) % 251);
}

// Connects to 127.0.0.1:port; a small receive buffer (set before connect, so the window stays
// small) makes a client that does not read push back at once.
int Connect(int port, int rcvbuf = 0) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (rcvbuf > 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  timeval tv{10, 0};  // no read in these tests waits longer
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  return fd;
}

void SendAll(int fd, const std::string& s) {
  ASSERT_EQ(send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
}

// Stand-in for cpp-httplib, listening where the server's does (a Unix-domain socket in a private
// directory, server/front/sockets.h): each connection's request for "/big" gets a kBigBody-byte
// body written with blocking sends (as a handler writes), anything else a short "ok". Counts what
// it sent.
class Upstream {
 public:
  Upstream() : listen_(ListenUnix(dir_.socket_path())), acceptor_([this] { AcceptLoop(); }) {}
  ~Upstream() {
    stop_ = true;
    shutdown(listen_, SHUT_RDWR);
    close(listen_);
    acceptor_.join();
    for (auto& t : handlers_) t.join();
  }
  const std::string& path() const { return dir_.socket_path(); }
  size_t big_sent() const { return big_sent_; }
  bool big_failed() const { return big_failed_; }

 private:
  void AcceptLoop() {
    for (;;) {
      const int fd = accept(listen_, nullptr, nullptr);
      if (fd < 0) return;
      if (stop_) {
        close(fd);
        return;
      }
      handlers_.emplace_back([this, fd] { Handle(fd); });
    }
  }
  void Handle(int fd) {
    std::string head;
    char c;
    while (head.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) head += c;
    if (head.rfind("GET /big ", 0) != 0) {
      const std::string r = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
      send(fd, r.data(), r.size(), MSG_NOSIGNAL);
      close(fd);
      return;
    }
    const std::string h = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kBigBody) +
                          "\r\nConnection: close\r\n\r\n";
    send(fd, h.data(), h.size(), MSG_NOSIGNAL);
    std::vector<char> chunk(64 * 1024);
    for (size_t at = 0; at < kBigBody && !stop_;) {
      const size_t n = std::min(chunk.size(), kBigBody - at);
      for (size_t i = 0; i < n; ++i) chunk[i] = PatternByte(at + i);
      const ssize_t w = send(fd, chunk.data(), n, MSG_NOSIGNAL);
      if (w <= 0) {
        big_failed_ = true;  // the front closed this connection
        break;
      }
      at += static_cast<size_t>(w);
      big_sent_ = at;
    }
    close(fd);
  }

  PrivateSocketDir dir_;
  int listen_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> big_sent_{0};
  std::atomic<bool> big_failed_{false};
  std::vector<std::thread> handlers_;  // touched by the acceptor thread only, joined after it
  std::thread acceptor_;
};

class FrontSlowReader : public ::testing::Test {
 protected:
  void Start(std::chrono::milliseconds idle_timeout) {
    FrontOptions o;
    o.idle_timeout = idle_timeout;
    front_ = std::make_unique<FrontEnd>(o);
    port_ = front_->Bind("127.0.0.1", 0);
    front_->SetUpstream(upstream_.path());
    loop_ = std::thread([this] { front_->Run(); });
  }
  void TearDown() override {
    if (!front_) return;
    front_->BeginShutdown(0ms);
    front_->Finish(100ms);
    loop_.join();
  }
  // Waits up to `limit` for `done`; true if it held.
  template <class F>
  static bool WaitFor(F done, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }
  // GET /small through the front on a new connection: its status line, or "" on no answer.
  std::string Small() {
    const int fd = Connect(port_);
    SendAll(fd, "GET /small HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    std::string got;
    char buf[512];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
    close(fd);
    return got.substr(0, got.find("\r\n"));
  }

  Upstream upstream_;
  std::unique_ptr<FrontEnd> front_;
  std::thread loop_;
  int port_ = 0;
};

TEST_F(FrontSlowReader, HoldsBackTheUpstreamThenDeliversEveryByte) {
  Start(10'000ms);
  const int fd = Connect(port_, 16 * 1024);
  SendAll(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
  // Not reading: the upstream's writes stall once the buffers on the way are full.
  ASSERT_TRUE(WaitFor([&] { return upstream_.big_sent() > 0; }, 5000ms));
  size_t seen = 0;
  for (int i = 0; i < 10; ++i) {  // stalled: no progress over 200 ms
    seen = upstream_.big_sent();
    std::this_thread::sleep_for(200ms);
    if (upstream_.big_sent() == seen) break;
  }
  EXPECT_EQ(upstream_.big_sent(), seen)
      << "the upstream kept writing to a client that reads nothing";
  EXPECT_LT(seen, kBigBody) << "the whole body went out to a client that reads nothing";
  // Other clients are answered meanwhile.
  EXPECT_EQ(Small(), "HTTP/1.1 200 OK");

  // Now read it all: the head, then kBigBody bytes in order.
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && recv(fd, &c, 1, 0) == 1) head += c;
  EXPECT_NE(head.find("Content-Length: " + std::to_string(kBigBody)), std::string::npos) << head;
  std::vector<char> buf(256 * 1024);
  size_t got = 0, wrong = 0;
  while (got < kBigBody) {
    const ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) wrong += buf[i] != PatternByte(got + i);
    got += static_cast<size_t>(n);
  }
  close(fd);
  EXPECT_EQ(got, kBigBody);
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(upstream_.big_sent(), kBigBody);
}

TEST_F(FrontSlowReader, ClientThatStopsReadingIsClosedAfterTheIdleTimeout) {
  Start(500ms);
  const int fd = Connect(port_, 16 * 1024);
  SendAll(fd, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n");
  // Never read: after 500 ms without progress the front closes the client and the upstream
  // connection, and the upstream's blocked write fails.
  EXPECT_TRUE(WaitFor([&] { return upstream_.big_failed(); }, 8000ms))
      << "the upstream was still held after " << upstream_.big_sent() << " bytes";
  EXPECT_LT(upstream_.big_sent(), kBigBody);
  EXPECT_TRUE(WaitFor([&] { return front_->stats().open == 0; }, 5000ms));
  EXPECT_EQ(Small(), "HTTP/1.1 200 OK");
  close(fd);
}

}  // namespace
}  // namespace bicache::server::front
