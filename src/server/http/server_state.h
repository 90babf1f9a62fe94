// HttpServer's insides, shared by http_server.cpp (accepting, shutdown) and session.cpp (one
// connection). Everything not atomic is touched only on the loop thread.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "server/http/http_server.h"

namespace bicache::server {

class Session;
using Clock = std::chrono::steady_clock;

// Where Exchanges post their answers: the loop, while the server exists (an answer that comes
// later, e.g. from the scheduler after the server went, is dropped).
class LoopPoster {
 public:
  explicit LoopPoster(boost::asio::io_context* io) : io_(io) {}
  void Post(std::function<void()> f);
  void Detach();

 private:
  std::mutex m_;
  boost::asio::io_context* io_;
};

struct HttpServer::State {
  State(ConnectionOptions o, Handler h);

  void Accept();
  void ApplyShutdown();  // draining / finishing changed: every session re-reads its deadline
  void SessionClosed(Session* s, bool admitted);

  ConnectionOptions options;
  Handler handler;
  boost::asio::io_context io{1};  // first: destroyed last
  boost::asio::ip::tcp::acceptor acceptor{io};
  boost::asio::steady_timer accept_retry{io}, finish_timer{io};
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  boost::asio::thread_pool pool{2};  // runs handlers
  std::shared_ptr<LoopPoster> poster;
  std::shared_ptr<std::atomic<int>> awaiting;
  std::atomic<int> open{0};  // admitted connections (changed on the loop thread only)
  std::atomic<uint64_t> refused{0}, timed_out{0};

  // Loop thread only.
  std::unordered_set<Session*> sessions;
  bool draining = false, finishing = false;
  Clock::time_point grace_deadline = Clock::time_point::max();
  Clock::time_point finish_deadline = Clock::time_point::max();
};

}  // namespace bicache::server
