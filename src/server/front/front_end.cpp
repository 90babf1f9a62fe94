#include "server/front/front_end.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

#include "server/front/sockets.h"
#include "util/error.h"

namespace bicache::server::front {
namespace {

// epoll tags: (connection id << 2) | kind.
constexpr uint64_t kClientTag = 0, kUpstreamTag = 1, kListenTag = 2, kWakeTag = 3;

}  // namespace

FrontEnd::FrontEnd(FrontOptions options) : options_(options) {
  RaiseFileLimit();
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  wake_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  // Kept free so that, with every descriptor in use, a connection can still be accepted and
  // refused instead of waiting in the backlog (and the listener firing for ever).
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (epoll_ < 0 || wake_ < 0) throw Error(ErrorKind::kIo, "cannot create the epoll loop");
  uint32_t registered = 0;
  Watch(wake_, kWakeTag, EPOLLIN, &registered);
}

FrontEnd::~FrontEnd() {
  for (auto& [id, c] : conns_) {
    if (c->upstream >= 0) close(c->upstream);
    close(c->fd);
  }
  for (int fd : {listen_, wake_, epoll_, reserve_fd_})
    if (fd >= 0) close(fd);
}

int FrontEnd::Bind(const std::string& host, int port) {
  int bound = 0;
  listen_ = Listen(host, port, &bound);
  uint32_t registered = 0;
  Watch(listen_, kListenTag, EPOLLIN, &registered);
  return bound;
}

void FrontEnd::Watch(int fd, uint64_t tag, uint32_t events, uint32_t* registered) {
  if (events == *registered) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  const int op = *registered == 0 ? EPOLL_CTL_ADD : events == 0 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD;
  epoll_ctl(epoll_, op, fd, &ev);
  *registered = events;
}

void FrontEnd::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_, &one, sizeof(one));
}

void FrontEnd::BeginShutdown(std::chrono::milliseconds grace) {
  grace_ns_.store(grace.count() * 1'000'000);
  draining_.store(true);
  Wake();
}

void FrontEnd::Finish(std::chrono::milliseconds flush) {
  flush_ns_.store(flush.count() * 1'000'000);
  draining_.store(true);  // grace 0 unless BeginShutdown gave one
  finishing_.store(true);
  Wake();
}

void FrontEnd::Run() {
  std::vector<epoll_event> events(256);
  for (;;) {
    ApplyShutdown();
    for (uint64_t id : closed_) conns_.erase(id);
    closed_.clear();
    if (finish_applied_ && conns_.empty()) return;
    if (finish_applied_ && Clock::now() >= finish_deadline_) {
      for (auto& [id, c] : conns_) Close(*c);
      conns_.clear();
      closed_.clear();
      return;
    }
    int timeout_ms = 1000;
    if (!deadlines_.empty()) {
      const auto wait = deadlines_.begin()->first - Clock::now();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(wait).count() + 1, 0, 1000));
    }
    const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), timeout_ms);
    for (int i = 0; i < n; ++i) Dispatch(events[i].data.u64, events[i].events);
    ExpireDeadlines();
    for (uint64_t id : closed_) conns_.erase(id);
    closed_.clear();
  }
}

void FrontEnd::Dispatch(uint64_t tag, uint32_t events) {
  const uint64_t kind = tag & 3;
  if (kind == kListenTag) return Accept();
  if (kind == kWakeTag) {
    uint64_t v;
    [[maybe_unused]] ssize_t n = read(wake_, &v, sizeof(v));
    return;
  }
  const auto it = conns_.find(tag >> 2);
  if (it == conns_.end() || it->second->closed) return;  // closed earlier in this batch
  Connection& c = *it->second;
  if (kind == kClientTag) {
    OnClient(c, events);
  } else {
    OnUpstream(c, events);
  }
  if (!c.closed) Rearm(c);
}

void FrontEnd::Accept() {
  for (int i = 0; i < 256 && listen_ >= 0; ++i) {
    const int fd = accept4(listen_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if ((errno == EMFILE || errno == ENFILE) && reserve_fd_ >= 0) {
        // Out of descriptors: take the one kept in reserve to refuse the connection at once.
        close(reserve_fd_);
        const int refused = accept4(listen_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (refused >= 0) {
          refused_.fetch_add(1, std::memory_order_relaxed);
          const std::string r =
              ErrorResponse(503, "the server has no free connection slot", "too_many_connections");
          [[maybe_unused]] ssize_t n = send(refused, r.data(), r.size(), MSG_NOSIGNAL);
          close(refused);
        }
        reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      return;  // EAGAIN: none left; anything else: try again at the next event
    }
    // The front end writes a response as its pieces come from the upstream: without NODELAY, a
    // piece sent while the previous one is unacknowledged waits for the client's delayed ACK
    // (~40 ms) on a kept-alive connection.
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    if (admitted_ >= options_.max_connections) {
      Refuse(fd);
      continue;
    }
    auto c = std::make_unique<Connection>();
    c->id = next_id_++;
    c->fd = fd;
    c->phase_start = c->head_start = c->last_write = Clock::now();
    open_.store(++admitted_, std::memory_order_relaxed);
    Connection& ref = *c;
    conns_.emplace(c->id, std::move(c));
    Watch(fd, ref.id << 2 | kClientTag, EPOLLIN | EPOLLRDHUP, &ref.client_events);
    Rearm(ref);
  }
}

void FrontEnd::Refuse(int fd) {
  // Held only until the 503 is out and the client has closed (at most the closing deadline), and
  // not counted: a flood of refused connections cannot crowd out the admitted ones.
  auto c = std::make_unique<Connection>();
  c->id = next_id_++;
  c->fd = fd;
  c->admitted = false;
  c->phase_start = c->last_write = Clock::now();
  Connection& ref = *c;
  conns_.emplace(c->id, std::move(c));
  Watch(fd, ref.id << 2 | kClientTag, EPOLLIN | EPOLLRDHUP, &ref.client_events);
  refused_.fetch_add(1, std::memory_order_relaxed);
  Reject(ref, 503,
         "too many open connections (this server holds up to " +
             std::to_string(options_.max_connections) + ", --max-connections)",
         "too_many_connections");
  if (!ref.closed) Rearm(ref);
}

void FrontEnd::Rearm(Connection& c) {
  if (c.closed) return;
  const Clock::time_point was = c.deadline;
  Clock::time_point d = Clock::time_point::max();
  switch (c.phase) {
    case Phase::kHead:
      if (c.in.empty() && c.requests > 0) {
        d = c.phase_start + options_.idle_timeout;
      } else {
        d = (c.in.empty() ? c.phase_start : c.head_start) + options_.header_timeout;
      }
      // An idle connection stays open until Finish's deadline (a request on it gets 503); a head
      // under way has the grace.
      if (drain_applied_ && !c.in.empty()) d = std::min(d, grace_deadline_);
      break;
    case Phase::kBody:
      d = c.phase_start + options_.body_timeout;
      if (drain_applied_) d = std::min(d, grace_deadline_);
      break;
    case Phase::kUpstream:
      // A client that stops reading its response is given the idle timeout to resume.
      if (c.pending_out() > 0) d = c.last_write + options_.idle_timeout;
      break;
    case Phase::kClosing:
      d = c.pending_out() > 0 ? c.last_write + options_.idle_timeout
                              : c.phase_start + std::chrono::seconds(2);
      break;
  }
  if (finish_applied_) d = std::min(d, finish_deadline_);
  if (d == was) return;
  if (was != Clock::time_point::max()) deadlines_.erase({was, c.id});
  c.deadline = d;
  if (d != Clock::time_point::max()) deadlines_.insert({d, c.id});
}

void FrontEnd::ExpireDeadlines() {
  const Clock::time_point now = Clock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    const auto it = conns_.find(id);
    if (it == conns_.end() || it->second->closed) continue;
    Connection& c = *it->second;
    c.deadline = Clock::time_point::max();
    OnDeadline(c);
    if (!c.closed) Rearm(c);
  }
}

void FrontEnd::OnDeadline(Connection& c) {
  const bool quiet = drain_applied_ || finish_applied_ || c.phase == Phase::kClosing ||
                     c.phase == Phase::kUpstream || (c.phase == Phase::kHead && c.in.empty());
  if (quiet) return Close(c);
  const auto secs = [](std::chrono::milliseconds ms) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(ms.count()) / 1000.0);
    return std::string(buf);
  };
  timed_out_.fetch_add(1, std::memory_order_relaxed);
  if (c.phase == Phase::kHead) {
    Reject(c, 408,
           "the request head did not arrive within " + secs(options_.header_timeout) +
               " s (--header-timeout)",
           "request_timeout");
  } else {
    Reject(c, 408,
           "the request body did not arrive within " + secs(options_.body_timeout) +
               " s (--body-timeout)",
           "request_timeout");
  }
}

void FrontEnd::ApplyShutdown() {
  const Clock::time_point now = Clock::now();
  bool changed = false;
  if (draining_.load() && !drain_applied_) {
    changed = true;
    drain_applied_ = true;
    grace_deadline_ = now + std::chrono::nanoseconds(grace_ns_.load());
    if (listen_ >= 0) {
      epoll_ctl(epoll_, EPOLL_CTL_DEL, listen_, nullptr);
      close(listen_);
      listen_ = -1;
    }
  }
  if (finishing_.load() && !finish_applied_) {
    changed = true;
    finish_applied_ = true;
    finish_deadline_ = now + std::chrono::nanoseconds(flush_ns_.load());
  }
  if (!changed) return;
  // Idle connections are not closed here: one that sends a request before Finish's deadline gets
  // 503 (docs/serving.md), rather than a close the client could not tell from a network failure.
  for (auto& [id, c] : conns_) Rearm(*c);
}

void FrontEnd::Close(Connection& c) {
  if (c.closed) return;
  CloseUpstream(c);
  if (c.deadline != Clock::time_point::max()) deadlines_.erase({c.deadline, c.id});
  c.deadline = Clock::time_point::max();
  close(c.fd);  // also drops it from the epoll set
  c.closed = true;
  if (c.admitted) open_.store(--admitted_, std::memory_order_relaxed);
  closed_.push_back(c.id);
}

}  // namespace bicache::server::front
