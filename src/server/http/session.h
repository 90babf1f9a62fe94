// One client connection (server/http/http_server.h): reads requests under deadlines, hands each to
// the handler as an Exchange, writes its answer (whole or streamed), keeps the connection alive
// or closes it. Runs on the loop thread only; Exchange::Sink's calls arrive there by post.
//
// Phases: kHead (the first request's head, from accept; or a later one's, from its first byte) ->
// kBody -> kHandling (the handler has it; the socket is watched for the client leaving) ->
// kWriting or kStreaming -> kIdle (kept alive, waiting for the next request's first byte) or
// kClosing (the last bytes go out, the sending side is shut, what the client still sends is
// dropped, so a close does not reset the connection before the client read its answer).
#pragma once

#include <boost/beast/core/flat_buffer.hpp>
#include <memory>
#include <optional>
#include <string>

#include "server/http/request_reading.h"
#include "server/http/server_state.h"

namespace bicache::server {

class Session : public Exchange::Sink, public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::State& st, boost::asio::ip::tcp::socket socket, bool admitted);

  void Start();
  void ApplyShutdown() { Rearm(); }
  void Close();

  // Exchange::Sink
  void Answer(HttpResponse response) override;
  void Stream(HttpResponse head, std::function<StreamPiece()> pull, std::string idle) override;
  void Pump() override;

 private:
  enum class Phase { kIdle, kHead, kBody, kHandling, kWriting, kStreaming, kClosing };

  void WaitForRequest();
  void ReadHead();
  void OnHead(const boost::system::error_code& ec);
  void ReadBody();
  void OnBody(const boost::system::error_code& ec);
  void Dispatch();
  void WatchPeer();
  void PeerGone();
  void WriteResponse(HttpResponse r);
  // Writes `r` (only its head for a stream or a HEAD request), then runs `then`; a failed write
  // is the client gone.
  void Send(HttpResponse r, bool close, bool stream_head, std::function<void(Session&)> then);
  void WriteChunk(std::string data, bool last);
  void AfterResponse(bool close);
  void Reject(const Refusal& r);
  void LingerClose();
  void Drain();
  void Rearm();
  void OnTimer();
  void SetPhase(Phase p);

  HttpServer::State& st_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer timer_;
  boost::beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  Phase phase_ = Phase::kHead;
  Clock::time_point phase_start_, deadline_ = Clock::time_point::max();
  Clock::time_point write_start_, last_send_;
  bool admitted_, closed_ = false, keep_alive_ = false, head_only_ = false;
  bool writing_ = false, watching_ = false;
  std::weak_ptr<Exchange> exchange_;
  // A stream: its producer, its idle payload, and whether the producer may have more.
  std::function<StreamPiece()> pull_;
  std::string idle_;
  bool pull_pending_ = false;
};

}  // namespace bicache::server
