// One HTTP request as a route handler sees it, and the way back to its client (server/http/).
//
// The connection layer (HttpServer, Session) reads a complete request under its deadlines and
// caps, then hands an Exchange to the handler on a worker thread. The handler answers once, from
// any thread and at any later time: Respond() with a whole response, or BeginStream() with a
// chunked response whose pieces the connection pulls as its client takes them (a slow reader
// holds the producer back instead of growing a buffer). A client that leaves before its response
// is complete runs OnClientGone's callback, which is how a request is cancelled wherever it is.
// No Boost type appears here: the routes compile without Beast.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bicache::server {

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra fields (Retry-After, Allow)
  bool close = false;  // end the connection after this response
};

// What a stream's producer has ready: `data` may be empty (nothing now; the connection waits for
// Notify()); `last` ends the response after `data`.
struct StreamPiece {
  std::string data;
  bool last = false;
};

struct HttpRequest {
  std::string method;  // as sent ("GET", "POST", or an unknown token)
  std::string path;    // the target without its query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The first value of header `name` (case-insensitive), "" when absent.
  std::string header(std::string_view name) const;
};

class Exchange {
 public:
  // `post` runs a function on the connection's thread (it may be dropped once the connection is
  // gone); Session gives it.
  using Post = std::function<void(std::function<void()>)>;
  struct Sink;  // the connection's side (below; Session implements it)

  // `awaiting` counts exchanges not answered yet (HttpServer::awaiting_answers): this one is
  // counted from here until its first answer (or its end).
  Exchange(HttpRequest request, std::weak_ptr<Sink> sink, Post post,
           std::shared_ptr<std::atomic<int>> awaiting);
  // An exchange dropped without an answer answers 500 (a handler bug must not hang a client).
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const HttpRequest& request() const { return request_; }

  // Any thread; the first of Respond/BeginStream wins, later calls are ignored.
  void Respond(HttpResponse response);
  // `head`'s status, type and headers start a chunked response; `pull` runs on the connection's
  // thread right after and again after each piece is written when Notify() was called meanwhile.
  // `idle` is written when nothing was for a second (an SSE comment keeps proxies and clients
  // from timing out, and a write is how a vanished client is noticed).
  void BeginStream(HttpResponse head, std::function<StreamPiece()> pull, std::string idle);
  // Any thread: the producer may have more.
  void Notify();
  // `f` runs once when the client leaves (or the connection closes) before the response is
  // complete; at once (on this thread) if that already happened. Not under any lock of ours.
  void OnClientGone(std::function<void()> f);

  // The connection's side (Session): the client left.
  void ClientGone();

 private:
  bool TakeAnswer();  // true for the first answer

  HttpRequest request_;
  std::weak_ptr<Sink> sink_;
  Post post_;
  std::shared_ptr<std::atomic<int>> awaiting_;
  mutable std::mutex m_;
  bool answered_ = false, gone_ = false;
  std::function<void()> on_gone_;
};

// The connection's side of an exchange; its calls run on the connection's thread.
struct Exchange::Sink {
  virtual ~Sink() = default;
  virtual void Answer(HttpResponse response) = 0;
  virtual void Stream(HttpResponse head, std::function<StreamPiece()> pull, std::string idle) = 0;
  virtual void Pump() = 0;  // the stream's producer may have more
};

}  // namespace bicache::server
