// The HTTP/1.1 server: Boost.Beast over Boost.Asio, one event-loop thread for every connection
// (docs/serving.md, "Connections"; why Beast: docs/hardening.md, "The HTTP library").
//
// The loop accepts, reads each request head and body under total deadlines (--header-timeout,
// --body-timeout: 408), refuses what request_reading.h lists, answers connections over
// --max-connections with 503 at once, closes kept-alive connections idle for --idle-timeout, and
// hands each complete request to the handler on a small worker pool (parsing JSON and tokenizing
// a long prompt never stall the loop). Responses come back through the request's Exchange from
// any thread. A slow or idle client costs a descriptor and a few KiB; nothing else listens.
//
// Threads: Run() is the loop; BeginShutdown(), Finish() and the counters are safe from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/http/exchange.h"

namespace bicache::server {

struct ConnectionOptions {
  std::chrono::milliseconds header_timeout{10'000};  // whole request head, from its first byte
  std::chrono::milliseconds body_timeout{30'000};    // whole body, from the end of the head
  std::chrono::milliseconds idle_timeout{15'000};    // kept-alive connection between requests
  int max_connections = 1024;                        // open client connections; more get 503
  size_t max_body_bytes = 1 << 20;                   // larger Content-Length: 413 at once
};

// Counters for /metrics (server/metrics.h).
struct ConnectionStats {
  uint64_t open = 0;       // client connections held (counted against --max-connections)
  uint64_t refused = 0;    // answered 503 over --max-connections
  uint64_t timed_out = 0;  // answered 408: a head or body slower than its deadline
};

class HttpServer {
 public:
  using Handler = std::function<void(std::shared_ptr<Exchange>)>;

  HttpServer(ConnectionOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds host:port (port 0: any free port) and raises the descriptor limit; returns the port.
  // Throws Error(kIo) "cannot listen on HOST:PORT: reason".
  int Bind(const std::string& host, int port);
  // Serves until Finish() has closed every connection.
  void Run();
  // Stops accepting; a request arriving on an open connection from now on gets 503 (and the
  // connection closes); a head or body still coming has until now + grace; requests with a handler
  // go on; idle kept-alive connections stay open (a request on one gets its 503) until Finish.
  void BeginShutdown(std::chrono::milliseconds grace);
  // Every connection closes within `flush` (answers in flight get that long to go out); then Run()
  // returns.
  void Finish(std::chrono::milliseconds flush);
  // Requests handed to the handler whose answer has not begun.
  int awaiting_answers() const;
  ConnectionStats stats() const;

  struct State;  // server/http/http_server.cpp; Session reaches it

 private:
  std::shared_ptr<State> state_;
};

}  // namespace bicache::server
