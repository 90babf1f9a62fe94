#include "server/http/session.h"

#include <sys/socket.h>

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_cat.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <cstdio>

#include "server/api_request.h"

namespace bicache::server {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

std::string Seconds(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// Errors of the connection itself (the client left, or we closed it), as opposed to a request
// that did not parse.
bool ConnectionEnded(const error_code& ec) {
  return ec.category() != bhttp::make_error_code(bhttp::error::header_limit).category() ||
         ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
         ec == bhttp::error::short_read;
}

constexpr auto kLinger = std::chrono::seconds(2);
constexpr auto kHeartbeat = std::chrono::seconds(1);

}  // namespace

Session::Session(HttpServer::State& st, asio::ip::tcp::socket socket, bool admitted)
    : st_(st), socket_(std::move(socket)), timer_(st.io), admitted_(admitted) {}

void Session::Start() {
  error_code ignored;
  socket_.non_blocking(true, ignored);  // WaitForRequest's read_some never blocks the loop
  if (!admitted_) {
    return Reject({503,
                   "too many open connections (this server holds up to " +
                       std::to_string(st_.options.max_connections) + ", --max-connections)",
                   "too_many_connections"});
  }
  ReadHead();  // the first request's head is timed from the accept
}

void Session::SetPhase(Phase p) {
  phase_ = p;
  phase_start_ = Clock::now();
}

// ---- reading a request ---------------------------------------------------------------------

void Session::WaitForRequest() {
  // Blank lines between requests are skipped (RFC 9112, 2.2: some clients send one after a body).
  const auto data = buffer_.data();
  const char* p = static_cast<const char*>(data.data());
  size_t blank = 0;
  while (blank < data.size() && (p[blank] == '\r' || p[blank] == '\n')) ++blank;
  buffer_.consume(blank);
  if (buffer_.size() > 0) return ReadHead();  // the next request is already here (pipelined)
  if (phase_ != Phase::kIdle) {
    SetPhase(Phase::kIdle);
    Rearm();
  }
  socket_.async_wait(asio::socket_base::wait_read, [self = shared_from_this()](error_code ec) {
    if (self->closed_ || self->phase_ != Phase::kIdle) return;
    if (ec) return self->Close();
    // Its head is timed from its first byte; what arrived is looked at for blank lines first.
    error_code rec;
    const size_t n = self->socket_.read_some(self->buffer_.prepare(4096), rec);
    if (rec && rec != asio::error::would_block) return self->Close();
    self->buffer_.commit(n);
    self->WaitForRequest();
  });
}

void Session::ReadHead() {
  SetPhase(Phase::kHead);
  Rearm();
  ResetParser(parser_, st_.options.max_body_bytes);
  bhttp::async_read_header(socket_, buffer_, *parser_,
                           [self = shared_from_this()](error_code ec, size_t) {
                             if (self->closed_ || self->phase_ != Phase::kHead) return;
                             self->OnHead(ec);
                           });
}

void Session::OnHead(const error_code& ec) {
  if (ec) {
    if (ConnectionEnded(ec)) return Close();
    const auto data = buffer_.data();
    return Reject(RefusalFor(ec, st_.options.max_body_bytes,
                             std::string_view(static_cast<const char*>(data.data()), data.size())));
  }
  if (auto r = CheckHead(*parser_, st_.options.max_body_bytes)) return Reject(*r);
  // Shutting down: every request that arrives gets 503, before its body.
  if (st_.draining) return Reject({503, "the server is shutting down", ""});
  if (parser_->is_done()) return Dispatch();
  if (parser_->get()[bhttp::field::expect] == "100-continue" && buffer_.size() == 0) {
    auto msg = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    asio::async_write(socket_, asio::buffer(*msg),
                      [self = shared_from_this(), msg](error_code wec, size_t) {
                        if (self->closed_ || self->phase_ != Phase::kBody) return;
                        if (wec) self->Close();
                      });
  }
  ReadBody();
}

void Session::ReadBody() {
  SetPhase(Phase::kBody);
  Rearm();
  bhttp::async_read(socket_, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
    if (self->closed_ || self->phase_ != Phase::kBody) return;
    self->OnBody(ec);
  });
}

void Session::OnBody(const error_code& ec) {
  if (ec) return ConnectionEnded(ec) ? Close() : Reject(RefusalFor(ec, st_.options.max_body_bytes));
  Dispatch();
}

void Session::Dispatch() {
  SetPhase(Phase::kHandling);
  Rearm();
  keep_alive_ = parser_->get().keep_alive();
  head_only_ = parser_->get().method() == bhttp::verb::head;
  auto ex = std::make_shared<Exchange>(
      ToHttpRequest(*parser_), weak_from_this(),
      [poster = st_.poster](std::function<void()> f) { poster->Post(std::move(f)); }, st_.awaiting);
  parser_.reset();
  exchange_ = ex;
  asio::post(st_.pool, [h = st_.handler, ex = std::move(ex)]() mutable {
    try {
      h(ex);
    } catch (const std::exception& e) {
      HttpResponse r;
      r.status = 500;
      r.body = ErrorJson(500, std::string("internal error: ") + e.what());
      ex->Respond(std::move(r));
    }
  });
  WatchPeer();
}

// ---- while the handler has the request: noticing the client leave --------------------------

void Session::WatchPeer() {
  if (watching_) return;
  watching_ = true;
  socket_.async_wait(asio::socket_base::wait_read, [self = shared_from_this()](error_code ec) {
    self->watching_ = false;
    const Phase p = self->phase_;
    if (self->closed_ || ec) return;
    if (p != Phase::kHandling && p != Phase::kWriting && p != Phase::kStreaming) return;
    // Readable: the client closed (0), reset (error), or sent its next request early (data: left
    // for after this response; the watch ends there).
    char c;
    const ssize_t n = recv(self->socket_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      return self->PeerGone();
    if (n < 0) self->WatchPeer();
  });
}

void Session::PeerGone() {
  if (auto ex = exchange_.lock()) ex->ClientGone();
  Close();
}

// ---- answers ----------------------------------------------------------------------------------

void Session::Answer(HttpResponse r) {
  if (closed_ || phase_ != Phase::kHandling) return;
  WriteResponse(std::move(r));
}

void Session::WriteResponse(HttpResponse r) {
  SetPhase(Phase::kWriting);
  const bool close = r.close || !keep_alive_;
  Send(std::move(r), close, false, [close](Session& s) { s.AfterResponse(close); });
}

void Session::Stream(HttpResponse head, std::function<StreamPiece()> pull, std::string idle) {
  if (closed_ || phase_ != Phase::kHandling) return;
  SetPhase(Phase::kStreaming);
  pull_ = std::move(pull);
  idle_ = std::move(idle);
  Send(std::move(head), !keep_alive_, true, [](Session& s) {
    s.last_send_ = Clock::now();
    s.Pump();
  });
}

void Session::Send(HttpResponse r, bool close, bool stream_head,
                   std::function<void(Session&)> then) {
  struct Out {
    bhttp::response<bhttp::string_body> res;
    std::optional<bhttp::response_serializer<bhttp::string_body>> sr;
  };
  auto out = std::make_shared<Out>();
  out->res.result(static_cast<unsigned>(r.status));
  out->res.version(11);
  out->res.set(bhttp::field::content_type, r.content_type);
  for (auto& [k, v] : r.headers) out->res.set(k, v);
  out->res.keep_alive(!close);
  if (stream_head) {
    out->res.chunked(true);
  } else {
    out->res.body() = std::move(r.body);
    out->res.prepare_payload();
  }
  writing_ = true;
  write_start_ = Clock::now();
  Rearm();
  auto done = [self = shared_from_this(), out, then = std::move(then)](error_code ec, size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    if (ec) return self->PeerGone();
    then(*self);
  };
  if (stream_head || head_only_) {  // HEAD: the fields GET would send, no body
    out->sr.emplace(out->res);
    bhttp::async_write_header(socket_, *out->sr, std::move(done));
  } else {
    bhttp::async_write(socket_, out->res, std::move(done));
  }
}

void Session::Pump() {
  if (closed_ || phase_ != Phase::kStreaming) return;
  pull_pending_ = true;  // also when called during the head's write: pulled right after it
  if (writing_) return;  // pulled again when this write ends
  pull_pending_ = false;
  StreamPiece piece = pull_();
  if (!piece.data.empty() || piece.last) return WriteChunk(std::move(piece.data), piece.last);
  Rearm();  // nothing now: the heartbeat, or Notify()
}

void Session::WriteChunk(std::string data, bool last) {
  writing_ = true;
  write_start_ = Clock::now();
  Rearm();
  auto bytes = std::make_shared<std::string>(std::move(data));
  auto after = [self = shared_from_this(), bytes, last](error_code ec, size_t) {
    self->writing_ = false;
    if (self->closed_) return;
    if (ec) return self->PeerGone();
    self->last_send_ = Clock::now();
    if (last) return self->AfterResponse(!self->keep_alive_);
    if (self->pull_pending_) return self->Pump();
    self->Rearm();
  };
  if (bytes->empty()) {  // the last chunk alone
    asio::async_write(socket_, bhttp::make_chunk_last(), std::move(after));
  } else if (last) {
    asio::async_write(socket_,
                      boost::beast::buffers_cat(bhttp::make_chunk(asio::buffer(*bytes)),
                                                bhttp::make_chunk_last()),
                      std::move(after));
  } else {
    asio::async_write(socket_, bhttp::make_chunk(asio::buffer(*bytes)), std::move(after));
  }
}

void Session::AfterResponse(bool close) {
  exchange_.reset();
  pull_ = nullptr;
  if (close) return LingerClose();
  WaitForRequest();
}

// ---- refusing and closing -------------------------------------------------------------------

void Session::Reject(const Refusal& r) {
  SetPhase(Phase::kClosing);
  error_code ignored;
  socket_.cancel(ignored);  // a read under way ends (its handler sees the phase moved on)
  HttpResponse res;
  res.status = r.status;
  res.body = ErrorJson(r.status, r.message, r.code);
  if (r.status == 503) res.headers.emplace_back("Retry-After", "1");
  head_only_ = false;
  Send(std::move(res), true, false, [](Session& s) { s.LingerClose(); });
}

void Session::LingerClose() {
  SetPhase(Phase::kClosing);
  error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_send, ignored);
  Rearm();
  Drain();
}

void Session::Drain() {
  auto scratch = std::make_shared<std::array<char, 4096>>();
  socket_.async_read_some(asio::buffer(*scratch),
                          [self = shared_from_this(), scratch](error_code ec, size_t) {
                            if (self->closed_) return;
                            if (ec) return self->Close();
                            self->Drain();
                          });
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  if (auto ex = exchange_.lock()) ex->ClientGone();  // an answer not complete: cancel it
  exchange_.reset();
  pull_ = nullptr;
  error_code ignored;
  socket_.close(ignored);
  timer_.cancel();
  st_.SessionClosed(this, admitted_);
}

// ---- deadlines --------------------------------------------------------------------------------

void Session::Rearm() {
  if (closed_) return;
  const ConnectionOptions& o = st_.options;
  Clock::time_point d = Clock::time_point::max();
  switch (phase_) {
    case Phase::kIdle:
      d = phase_start_ + o.idle_timeout;
      break;
    case Phase::kHead:
    case Phase::kBody:
      d = phase_start_ + (phase_ == Phase::kHead ? o.header_timeout : o.body_timeout);
      if (st_.draining) d = std::min(d, st_.grace_deadline);
      break;
    case Phase::kHandling:
      break;
    case Phase::kWriting:
    case Phase::kStreaming:
      // A client that stops reading its answer gets the idle timeout to resume; a stream with
      // nothing to send writes its idle payload after a second.
      d = writing_ ? write_start_ + o.idle_timeout : last_send_ + kHeartbeat;
      break;
    case Phase::kClosing:
      d = writing_ ? write_start_ + o.idle_timeout : phase_start_ + kLinger;
      break;
  }
  if (st_.finishing) d = std::min(d, st_.finish_deadline);
  if (d == deadline_) return;
  deadline_ = d;
  if (d == Clock::time_point::max()) {
    timer_.cancel();
    return;
  }
  timer_.expires_at(d);
  timer_.async_wait([self = shared_from_this()](error_code ec) {
    if (!ec && !self->closed_) self->OnTimer();
  });
}

void Session::OnTimer() {
  if (Clock::now() < deadline_) return;
  deadline_ = Clock::time_point::max();
  if (st_.finishing && Clock::now() >= st_.finish_deadline) return PeerGone();
  const bool reading = phase_ == Phase::kHead || phase_ == Phase::kBody;
  if (phase_ == Phase::kStreaming && !writing_) {
    if (!idle_.empty()) return WriteChunk(idle_, false);  // the heartbeat
    last_send_ = Clock::now();  // no idle payload: an empty chunk would end the response
    return Rearm();
  }
  if (!reading || st_.draining || (phase_ == Phase::kHead && buffer_.size() == 0))
    return PeerGone();  // idle, not reading its answer, lingering, or silent since it connected
  st_.timed_out.fetch_add(1, std::memory_order_relaxed);
  if (phase_ == Phase::kHead) {
    return Reject({408,
                   "the request head did not arrive within " + Seconds(st_.options.header_timeout) +
                       " s (--header-timeout)",
                   "request_timeout"});
  }
  Reject({408,
          "the request body did not arrive within " + Seconds(st_.options.body_timeout) +
              " s (--body-timeout)",
          "request_timeout"});
}

}  // namespace bicache::server
