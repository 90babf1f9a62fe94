// The connection front end: an epoll loop that owns the public socket and every client connection,
// so slow or idle clients cost a descriptor and a few bytes each instead of an HTTP thread
// (docs/serving.md, "Connections": cpp-httplib 0.11 serves one connection per pool thread, so 76
// clients sending a header byte every 2 s held all of its threads).
//
// It accepts everything, reads and checks each request head and body itself under total deadlines
// (--header-timeout, --body-timeout: 408), refuses a Content-Length over the body limit at once
// (413) and connections over --max-connections at once (503), closes kept-alive connections idle
// for --idle-timeout, and only hands a complete request to cpp-httplib, which listens on a
// Unix-domain socket in a directory only this user can enter (server/front/sockets.h; no second
// TCP listener): one request per upstream connection ("Connection: close"), so an httplib thread is
// taken only by a request that is ready to run. The response (an SSE stream too) is relayed back
// without blocking the loop; a client that goes away closes its upstream connection, which the
// handler's ConnectionWatch notices and cancels the request. While shutting down, a request that
// arrives on an open connection is answered 503 by the front end itself.
//
// Threads: Run() is the loop; BeginShutdown() and Finish() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "server/front/connection.h"

namespace bicache::server::front {

struct FrontOptions {
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

class FrontEnd {
 public:
  explicit FrontEnd(FrontOptions options);
  ~FrontEnd();
  FrontEnd(const FrontEnd&) = delete;
  FrontEnd& operator=(const FrontEnd&) = delete;

  // Binds the public socket (port 0: any); returns the port. Throws Error(kIo).
  int Bind(const std::string& host, int port);
  // Where complete requests go: cpp-httplib on the Unix-domain socket at `path`.
  void SetUpstream(std::string path) { upstream_path_ = std::move(path); }
  // Serves until Finish() has closed every connection.
  void Run();
  // Stops accepting; a request that arrives on an open connection from now on gets 503 (and the
  // connection closes); unfinished requests (a head or body still coming) close at now + grace;
  // requests with the upstream go on; idle kept-alive connections stay open until Finish's end.
  void BeginShutdown(std::chrono::milliseconds grace);
  // Every connection closes within `flush` (responses in flight get that long to go out, and a
  // request arriving on an idle connection meanwhile still gets its 503); then Run() returns.
  void Finish(std::chrono::milliseconds flush);
  // Requests relayed to the upstream whose response has not begun (their handlers may not even
  // have started). Safe from any thread.
  int awaiting_answers() const { return awaiting_.load(std::memory_order_relaxed); }
  // Safe from any thread.
  ConnectionStats stats() const {
    return {static_cast<uint64_t>(open_.load(std::memory_order_relaxed)),
            refused_.load(std::memory_order_relaxed), timed_out_.load(std::memory_order_relaxed)};
  }

 private:
  using Deadline = std::pair<Clock::time_point, uint64_t>;

  // front_end.cpp: the loop, accepting, deadlines, shutdown.
  void Accept();
  void Refuse(int fd);
  void Dispatch(uint64_t tag, uint32_t events);
  void ExpireDeadlines();
  void OnDeadline(Connection& c);
  void ApplyShutdown();
  void Rearm(Connection& c);
  void Close(Connection& c);
  void Watch(int fd, uint64_t tag, uint32_t events, uint32_t* registered);
  void Wake();

  // front_relay.cpp: one connection's request and response.
  void OnClient(Connection& c, uint32_t events);
  bool ReadClient(Connection& c);
  void Advance(Connection& c);
  void CheckBody(Connection& c);
  void StartUpstream(Connection& c, size_t request_bytes);
  void OnUpstream(Connection& c, uint32_t events);
  void Relay(Connection& c, std::string_view data);
  void RelayBody(Connection& c, std::string_view data);
  void ResponseDone(Connection& c, bool upstream_ended);
  void Reject(Connection& c, int status, const std::string& message, const std::string& code = "");
  void EnterClosing(Connection& c);
  void FlushClient(Connection& c);
  void UpdateClientEvents(Connection& c);
  void CloseUpstream(Connection& c);
  void SetAwaiting(Connection& c, bool awaiting);

  FrontOptions options_;
  int epoll_ = -1, listen_ = -1, wake_ = -1, reserve_fd_ = -1;
  std::string upstream_path_;
  uint64_t next_id_ = 1;
  int admitted_ = 0;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  std::vector<uint64_t> closed_;  // closed in this iteration, erased after it
  std::set<Deadline> deadlines_;
  std::atomic<bool> draining_{false}, finishing_{false};
  std::atomic<int> open_{0};      // admitted_, readable from other threads
  std::atomic<int> awaiting_{0};  // connections with awaiting_answer set
  std::atomic<uint64_t> refused_{0}, timed_out_{0};
  std::atomic<int64_t> grace_ns_{0}, flush_ns_{0};
  bool drain_applied_ = false, finish_applied_ = false;
  Clock::time_point grace_deadline_ = Clock::time_point::max();
  Clock::time_point finish_deadline_ = Clock::time_point::max();
};

}  // namespace bicache::server::front
