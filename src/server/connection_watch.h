// Noticing that the client of a non-streaming request has gone away, while its handler waits.
//
// cpp-httplib 0.11 gives a handler no access to its socket, and a non-streaming reply cannot write
// anything before the result (its status line would be committed too early: a later failure could
// no longer be a 5xx). So the handler finds its own connection's descriptor. The front end
// (server/front/) brings each request over its own Unix-domain connection whose client end is
// bound to a kernel-chosen abstract name, and names it in the request's X-Bicache-Relay header (a
// client's own header of that name is dropped): the handler's socket is the one of this process
// whose peer has that name. It polls it without reading for POLLRDHUP / POLLHUP / POLLERR, which
// the kernel raises when the front end closes it (its client went away). The descriptor stays valid
// for the whole handler: httplib closes a connection only after its handler returns, on the same
// thread.
//
// Limits: Linux (/proc/self/fd, autobind, POLLRDHUP).
#pragma once

#include <optional>

#include "server/front/http_head.h"
#include "server/httplib_wrap.h"

namespace bicache::server {

// The header the front end names a request's relay connection in.

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
