// Noticing that the client of a non-streaming request has gone away, while its handler waits.
//
// cpp-httplib 0.11 gives a handler no access to its socket, and a non-streaming reply cannot write
// anything before the result (its status line would be committed too early: a later failure could
// no longer be a 5xx). So the handler finds its own connection's descriptor: the one socket of this
// process whose local and peer addresses are the request's (a TCP 4-tuple names one connection),
// and polls it without reading for POLLRDHUP / POLLHUP / POLLERR, which the kernel raises when the
// peer closes or resets. The descriptor stays valid for the whole handler: httplib closes a
// connection only after its handler returns, on the same thread.
//
// Limits: Linux (/proc/self/fd, POLLRDHUP); a client that half-closes its sending side after the
// request (shutdown(SHUT_WR)) reads as gone. No common HTTP client does that.
#pragma once

#include <optional>

#include "server/httplib_wrap.h"

namespace bicache::server {

class ConnectionWatch {
 public:
  // The watch for `req`'s connection, or nullopt when it cannot be found (then nothing is watched).
  static std::optional<ConnectionWatch> Find(const httplib::Request& req);

  // True once the peer has closed or reset the connection. Never blocks, never reads.
  bool PeerGone() const;

  int fd() const { return fd_; }

 private:
  explicit ConnectionWatch(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace bicache::server
