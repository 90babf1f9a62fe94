#include "server/http/http_server.h"

#include <sys/resource.h>

#include <boost/asio/post.hpp>

#include "server/http/session.h"
#include "util/error.h"

namespace bicache::server {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

// Each held connection is one descriptor: the soft limit goes up to the hard one.
void RaiseFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

}  // namespace

void LoopPoster::Post(std::function<void()> f) {
  std::lock_guard<std::mutex> l(m_);
  if (io_) asio::post(*io_, std::move(f));
}

void LoopPoster::Detach() {
  std::lock_guard<std::mutex> l(m_);
  io_ = nullptr;
}

HttpServer::State::State(ConnectionOptions o, Handler h)
    : options(o),
      handler(std::move(h)),
      poster(std::make_shared<LoopPoster>(&io)),
      awaiting(std::make_shared<std::atomic<int>>(0)) {
  work.emplace(io.get_executor());
}

void HttpServer::State::Accept() {
  acceptor.async_accept([this](error_code ec, asio::ip::tcp::socket socket) {
    if (!acceptor.is_open() || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors (or memory): try again shortly rather than spin.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](error_code wec) {
        if (!wec) Accept();
      });
      return;
    }
    error_code ignored;
    socket.set_option(asio::ip::tcp::no_delay(true), ignored);
    // Refused connections are held only until their 503 is out and are not counted: a flood of
    // them cannot crowd out the admitted ones.
    const bool admit = open.load(std::memory_order_relaxed) < options.max_connections;
    if (admit) {
      open.fetch_add(1, std::memory_order_relaxed);
    } else {
      refused.fetch_add(1, std::memory_order_relaxed);
    }
    auto s = std::make_shared<Session>(*this, std::move(socket), admit);
    sessions.insert(s.get());
    s->Start();
    Accept();
  });
}

void HttpServer::State::SessionClosed(Session* s, bool was_admitted) {
  sessions.erase(s);
  if (was_admitted) open.fetch_sub(1, std::memory_order_relaxed);
  if (finishing && sessions.empty()) finish_timer.cancel();
}

void HttpServer::State::ApplyShutdown() {
  // Copied: a session may close (and leave the set) while it re-reads its deadline.
  const std::vector<Session*> all(sessions.begin(), sessions.end());
  for (Session* s : all) {
    if (sessions.count(s) != 0) s->ApplyShutdown();
  }
}

HttpServer::HttpServer(ConnectionOptions options, Handler handler)
    : state_(std::make_shared<State>(options, std::move(handler))) {}

HttpServer::~HttpServer() {
  state_->pool.join();  // handlers finish (their answers go nowhere once the poster detaches)
  state_->poster->Detach();
}

int HttpServer::Bind(const std::string& host, int port) {
  RaiseFileLimit();
  const std::string where = "cannot listen on " + host + ":" + std::to_string(port);
  error_code ec;
  asio::ip::tcp::resolver resolver(state_->io);
  const auto found =
      resolver.resolve(host, std::to_string(port), asio::ip::resolver_base::passive, ec);
  if (ec || found.empty())
    throw Error(ErrorKind::kIo, where + " (is the host an address of this machine?)");
  auto& a = state_->acceptor;
  for (const auto& entry : found) {
    a.open(entry.endpoint().protocol(), ec);
    if (ec) continue;
    // SO_REUSEADDR alone (no SO_REUSEPORT): a restart binds while old connections sit in
    // TIME_WAIT, and a second server on a port in use fails instead of sharing it. The system's
    // largest backlog: a burst of connections waits in the kernel, not in retries.
    a.set_option(asio::socket_base::reuse_address(true), ec);
    a.bind(entry.endpoint(), ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) break;
    error_code ignored;
    a.close(ignored);
  }
  if (ec) throw Error(ErrorKind::kIo, where + ": " + ec.message());
  state_->Accept();
  return a.local_endpoint().port();
}

void HttpServer::Run() {
  state_->io.run();
}

void HttpServer::BeginShutdown(std::chrono::milliseconds grace) {
  State* st = state_.get();
  asio::post(st->io, [st, grace] {
    if (st->draining) return;
    st->draining = true;
    st->grace_deadline = Clock::now() + grace;
    error_code ignored;
    st->acceptor.close(ignored);
    st->accept_retry.cancel();
    st->ApplyShutdown();
  });
}

void HttpServer::Finish(std::chrono::milliseconds flush) {
  State* st = state_.get();
  asio::post(st->io, [st, flush] {
    if (st->finishing) return;
    st->finishing = true;
    st->finish_deadline = Clock::now() + flush;
    error_code ignored;
    st->acceptor.close(ignored);
    st->accept_retry.cancel();
    st->ApplyShutdown();  // each session closes by the deadline (its own timer)
    st->work.reset();     // run() returns once nothing is left
    // A safety net: whatever still holds the loop past the deadline is cut.
    st->finish_timer.expires_at(st->finish_deadline + std::chrono::milliseconds(200));
    st->finish_timer.async_wait([st](error_code ec) {
      if (!ec) st->io.stop();
    });
    if (st->sessions.empty()) st->finish_timer.cancel();
  });
}

int HttpServer::awaiting_answers() const {
  return state_->awaiting->load(std::memory_order_relaxed);
}

ConnectionStats HttpServer::stats() const {
  return {static_cast<uint64_t>(state_->open.load(std::memory_order_relaxed)),
          state_->refused.load(std::memory_order_relaxed),
          state_->timed_out.load(std::memory_order_relaxed)};
}

}  // namespace bicache::server
