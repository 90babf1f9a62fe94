// One connection's request and response: reading and checking the request, handing it to the
// upstream, relaying the answer (FrontEnd's half in front_end.cpp runs the loop and the deadlines).
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "server/front/front_end.h"
#include "server/front/sockets.h"

namespace bicache::server::front {
namespace {

constexpr uint64_t kClientTag = 0, kUpstreamTag = 1;
constexpr size_t kReadChunk = 16 * 1024;
// Response bytes held for a client that reads slowly; beyond it the upstream is not read (and its
// handler's writes wait) until the client catches up.
constexpr size_t kMaxPendingOut = 256 * 1024;
// A chunked body's framing on top of --max-body-bytes of payload.
constexpr size_t kChunkSlack = 64 * 1024;

bool WouldBlock() {
  return errno == EAGAIN || errno == EWOULDBLOCK;
}

}  // namespace

void FrontEnd::OnClient(Connection& c, uint32_t events) {
  if (events & EPOLLOUT) FlushClient(c);
  if (c.closed) return;
  if (c.phase == Phase::kUpstream) {
    // The client left while its request runs: closing the upstream connection lets the handler
    // notice (server/connection_watch.h) and cancel the request.
    if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) Close(c);
    return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    if (!ReadClient(c)) return;
    if (c.phase != Phase::kClosing) Advance(c);
  }
}

bool FrontEnd::ReadClient(Connection& c) {
  char buf[kReadChunk];
  for (;;) {
    const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
    if (n > 0) {
      if (c.phase == Phase::kClosing) continue;  // after the answer: read and dropped
      if (c.in.empty()) c.head_start = Clock::now();
      c.in.append(buf, static_cast<size_t>(n));
      // Stop at the limits: Advance refuses what is over them.
      if (c.phase == Phase::kHead && c.in.size() > kMaxHeadBytes) return true;
      if (c.phase == Phase::kBody &&
          c.in.size() - c.head_len > options_.max_body_bytes + kChunkSlack)
        return true;
      continue;
    }
    if (n < 0 && WouldBlock()) return true;
    if (n < 0 && errno == EINTR) continue;
    Close(c);  // end of stream or an error: the client is gone (or has read its answer)
    return false;
  }
}

void FrontEnd::Advance(Connection& c) {
  if (c.phase == Phase::kHead) {
    // Blank lines before a request line are allowed (RFC 9112, 2.2).
    const size_t skip = c.in.find_first_not_of("\r\n");
    c.in.erase(0, skip == std::string::npos ? c.in.size() : skip);
    if (c.in.empty()) return;
    const size_t end = FindHeadEnd(c.in);
    if (end == std::string_view::npos && c.in.size() <= kMaxHeadBytes) return;
    if (end == std::string_view::npos || end > kMaxHeadBytes) {
      return Reject(c, 431, "the request head (request line and headers) is over 64 KiB");
    }
    auto parsed = ParseRequestHead(std::string_view(c.in).substr(0, end));
    if (const auto* e = std::get_if<HeadError>(&parsed)) return Reject(c, e->status, e->message);
    // Shutting down: every request that arrives gets 503 (docs/serving.md), before its body.
    if (drain_applied_) return Reject(c, 503, "the server is shutting down");
    c.req = std::move(std::get<RequestHead>(parsed));
    c.head_len = end;
    c.body_scanned = 0;
    c.chunks = ChunkedScanner();
    if (c.req.body == BodyKind::kLength && c.req.content_length > options_.max_body_bytes) {
      return Reject(c, 413,
                    "the request body is too large (this server accepts up to " +
                        std::to_string(options_.max_body_bytes) + " bytes)");
    }
    c.phase = Phase::kBody;
    c.phase_start = Clock::now();
    if (c.req.expect_continue && c.req.body != BodyKind::kNone && c.in.size() == end) {
      c.out += "HTTP/1.1 100 Continue\r\n\r\n";
      FlushClient(c);
      if (c.closed) return;
    }
  }
  if (c.phase == Phase::kBody) CheckBody(c);
}

void FrontEnd::CheckBody(Connection& c) {
  const size_t have = c.in.size() - c.head_len;
  size_t body = 0;
  if (c.req.body == BodyKind::kLength) {
    if (have < c.req.content_length) return;
    body = static_cast<size_t>(c.req.content_length);
  } else if (c.req.body == BodyKind::kChunked) {
    c.body_scanned += c.chunks.Feed(std::string_view(c.in).substr(c.head_len + c.body_scanned));
    if (c.chunks.failed()) return Reject(c, 400, "the chunked request body is malformed");
    if (c.chunks.data_bytes() > options_.max_body_bytes ||
        (!c.chunks.done() && have > options_.max_body_bytes + kChunkSlack)) {
      return Reject(c, 413,
                    "the request body is too large (this server accepts up to " +
                        std::to_string(options_.max_body_bytes) + " bytes)");
    }
    if (!c.chunks.done()) return;
    body = c.body_scanned;
  }
  StartUpstream(c, c.head_len + body);
}

void FrontEnd::StartUpstream(Connection& c, size_t request_bytes) {
  if (drain_applied_) return Reject(c, 503, "the server is shutting down");
  c.relay.clear();
  c.upstream = upstream_path_.empty() ? -1 : ConnectUnix(upstream_path_, &c.relay);
  const int connect_error = errno;
  ++c.upstream_serial;
  if (c.upstream < 0) {
    if (connect_error == EAGAIN) {  // the workers' backlog (SOMAXCONN) is full
      return Reject(c, 503, "the server is busy: retry shortly", "server_busy");
    }
    return Reject(c, 503, "the server cannot take requests now (its HTTP workers are not running)");
  }
  c.up_out = UpstreamHead(c.req, c.relay);
  c.up_out.append(c.in, c.head_len, request_bytes - c.head_len);
  c.in.erase(0, request_bytes);  // what is left is the start of a pipelined next request
  c.up_off = 0;
  c.up_connected = false;
  c.resp_head.clear();
  c.resp_started = false;
  c.resp_chunks = ChunkedScanner();
  c.phase = Phase::kUpstream;
  SetAwaiting(c, true);
  c.phase_start = Clock::now();
  Watch(c.upstream, c.id << 2 | kUpstreamTag, EPOLLOUT, &c.up_events);
  UpdateClientEvents(c);
}

void FrontEnd::OnUpstream(Connection& c, uint32_t events) {
  if (c.upstream < 0) return;
  if (!c.up_connected) {
    int err = 0;
    socklen_t len = sizeof(err);
    getsockopt(c.upstream, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      return Reject(c, 503,
                    "the server cannot take requests now (its HTTP workers are not running)");
    }
    c.up_connected = true;
  }
  while (c.up_off < c.up_out.size()) {
    const ssize_t n =
        send(c.upstream, c.up_out.data() + c.up_off, c.up_out.size() - c.up_off, MSG_NOSIGNAL);
    if (n > 0) {
      c.up_off += static_cast<size_t>(n);
    } else if (n < 0 && WouldBlock()) {
      return;
    } else if (!(n < 0 && errno == EINTR)) {
      return ResponseDone(c, true);
    }
  }
  if (!c.up_out.empty()) {  // the whole request is out: now the answer
    c.up_out = std::string();
    c.up_off = 0;
    Watch(c.upstream, c.id << 2 | kUpstreamTag, EPOLLIN | EPOLLRDHUP, &c.up_events);
    return;
  }
  char buf[kReadChunk];
  // Read until this upstream connection is done: a finished response may start the next,
  // pipelined request on a new one, which gets its own events.
  const uint64_t serial = c.upstream_serial;  // a descriptor number can come back at once
  while (c.upstream >= 0 && c.upstream_serial == serial && c.pending_out() < kMaxPendingOut) {
    const ssize_t n = recv(c.upstream, buf, sizeof(buf), 0);
    if (n > 0) {
      Relay(c, std::string_view(buf, static_cast<size_t>(n)));
      if (c.closed) return;
      continue;
    }
    if (n < 0 && WouldBlock()) break;
    if (n < 0 && errno == EINTR) continue;
    ResponseDone(c, true);
    break;
  }
  if (c.closed || c.upstream < 0 || c.upstream_serial != serial) return;  // ResponseDone flushed
  if (c.pending_out() >= kMaxPendingOut) {
    Watch(c.upstream, c.id << 2 | kUpstreamTag, 0, &c.up_events);
    c.upstream_paused = true;
  }
  FlushClient(c);
}

void FrontEnd::Relay(Connection& c, std::string_view data) {
  if (!c.resp_started) {
    c.resp_head.append(data);
    const size_t end = FindHeadEnd(c.resp_head);
    if (end == std::string_view::npos && c.resp_head.size() <= kMaxHeadBytes) return;
    std::optional<ResponseHead> r;
    if (end != std::string_view::npos) {
      r = ParseResponseHead(std::string_view(c.resp_head).substr(0, end), c.req.method == "HEAD");
    }
    if (!r) return Reject(c, 502, "internal error: the HTTP workers' response did not parse");
    c.resp = std::move(*r);
    c.resp_started = true;
    SetAwaiting(c, false);
    c.keep_alive = c.req.keep_alive && !drain_applied_ && c.resp.body != BodyKind::kUntilClose;
    c.out += ClientHead(c.resp, c.keep_alive);
    c.resp_left = c.resp.content_length;
    const std::string rest = c.resp_head.substr(end);
    c.resp_head = std::string();
    if (c.resp.body == BodyKind::kNone) return ResponseDone(c, false);
    if (!rest.empty()) RelayBody(c, rest);
    return;
  }
  RelayBody(c, data);
}

void FrontEnd::RelayBody(Connection& c, std::string_view data) {
  switch (c.resp.body) {
    case BodyKind::kNone:
      return;
    case BodyKind::kLength: {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(c.resp_left, data.size()));
      c.out.append(data.substr(0, n));
      c.resp_left -= n;
      if (c.resp_left == 0) ResponseDone(c, false);
      return;
    }
    case BodyKind::kChunked: {
      const size_t n = c.resp_chunks.Feed(data);
      c.out.append(data.substr(0, n));
      if (c.resp_chunks.failed()) c.keep_alive = false;
      if (c.resp_chunks.done() || c.resp_chunks.failed()) ResponseDone(c, false);
      return;
    }
    case BodyKind::kUntilClose:
      c.out.append(data);
      return;
  }
}

void FrontEnd::ResponseDone(Connection& c, bool upstream_ended) {
  CloseUpstream(c);
  if (!c.resp_started) {
    return Reject(c, 503,
                  "the request was not answered (the server's HTTP workers closed the connection)");
  }
  const bool complete = !upstream_ended || c.resp.body == BodyKind::kUntilClose;
  ++c.requests;
  c.req = RequestHead();
  c.phase_start = c.head_start = Clock::now();
  if (complete && c.keep_alive) {
    c.phase = Phase::kHead;
    FlushClient(c);
    if (!c.closed && !c.in.empty()) Advance(c);  // a pipelined request already here
    return;
  }
  // The answer ends the connection (or was cut short): send what there is, then close.
  EnterClosing(c);
  c.in = std::string();
  FlushClient(c);
}

void FrontEnd::Reject(Connection& c, int status, const std::string& message,
                      const std::string& code) {
  CloseUpstream(c);
  c.out += ErrorResponse(status, message, code);
  EnterClosing(c);
  c.keep_alive = false;
  c.in = std::string();
  FlushClient(c);
}

void FrontEnd::EnterClosing(Connection& c) {
  c.phase = Phase::kClosing;
  c.phase_start = Clock::now();
  // A connection on its way out no longer holds a --max-connections slot: a wave of deadlines
  // must not turn the clients that reconnect right after into 503s.
  if (c.admitted) {
    c.admitted = false;
    open_.store(--admitted_, std::memory_order_relaxed);
  }
}

void FrontEnd::FlushClient(Connection& c) {
  while (c.pending_out() > 0) {
    const ssize_t n = send(c.fd, c.out.data() + c.out_off, c.pending_out(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out_off += static_cast<size_t>(n);
      c.last_write = Clock::now();
    } else if (n < 0 && WouldBlock()) {
      break;
    } else if (!(n < 0 && errno == EINTR)) {
      return Close(c);  // the client is gone
    }
  }
  if (c.pending_out() == 0) {
    c.out.clear();
    c.out_off = 0;
    if (c.out.capacity() > 4 * kMaxPendingOut) c.out = std::string();
  } else if (c.out_off >= kMaxPendingOut) {
    c.out.erase(0, c.out_off);
    c.out_off = 0;
  }
  if (c.phase == Phase::kClosing && c.pending_out() == 0 && !c.shut_write) {
    // Answer sent: shut our side and read until the client closes (closing with its unread bytes
    // in our buffer would reset the connection and could discard the answer before it is read).
    shutdown(c.fd, SHUT_WR);
    c.shut_write = true;
    c.phase_start = Clock::now();
  }
  if (c.upstream_paused && c.upstream >= 0 && c.pending_out() < kMaxPendingOut / 2) {
    c.upstream_paused = false;
    Watch(c.upstream, c.id << 2 | kUpstreamTag, EPOLLIN | EPOLLRDHUP, &c.up_events);
  }
  UpdateClientEvents(c);
}

void FrontEnd::UpdateClientEvents(Connection& c) {
  uint32_t events = EPOLLRDHUP;
  if (c.phase != Phase::kUpstream) events |= EPOLLIN;
  if (c.pending_out() > 0) events |= EPOLLOUT;
  Watch(c.fd, c.id << 2 | kClientTag, events, &c.client_events);
}

void FrontEnd::SetAwaiting(Connection& c, bool awaiting) {
  if (c.awaiting_answer == awaiting) return;
  c.awaiting_answer = awaiting;
  awaiting_.fetch_add(awaiting ? 1 : -1, std::memory_order_relaxed);
}

void FrontEnd::CloseUpstream(Connection& c) {
  SetAwaiting(c, false);
  if (c.upstream < 0) return;
  close(c.upstream);
  c.upstream = -1;
  c.up_events = 0;
  c.upstream_paused = false;
}

}  // namespace bicache::server::front
