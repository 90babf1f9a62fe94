// Socket set-up for the connection front end: the public listener, the internal Unix-domain socket
// to the upstream (cpp-httplib) in a private directory, the descriptor limit. Linux.
#pragma once

#include <string>

namespace bicache::server::front {

// Binds and listens on host:port (port 0: any free port), non-blocking; returns the descriptor and
// sets *bound_port. Throws Error(kIo) "cannot listen on HOST:PORT: reason".
int Listen(const std::string& host, int port, int* bound_port);

// A directory only this user can enter (mkdtemp: mode 0700) holding the internal socket; removed,
// with the socket, by the destructor. Throws Error(kIo) when it cannot be made.
class PrivateSocketDir {
 public:
  PrivateSocketDir();
  ~PrivateSocketDir();
  PrivateSocketDir(const PrivateSocketDir&) = delete;
  PrivateSocketDir& operator=(const PrivateSocketDir&) = delete;
  const std::string& dir() const { return dir_; }
  const std::string& socket_path() const { return socket_; }  // dir()/http.sock

 private:
  std::string dir_, socket_;
};

// Binds a Unix-domain stream socket at `path` (mode 0600) and listens with the system's largest
// backlog; blocking (cpp-httplib's accept loop blocks on it). Throws Error(kIo).
int ListenUnix(const std::string& path);

// Starts a non-blocking connect to the Unix-domain socket at `path`. The socket is first bound to
// a kernel-chosen abstract name (autobind), which the accepting side sees as its peer: *name gets
// it (5 hex digits), so a handler can find its own connection (server/connection_watch.h). -1 when
// it failed at once (errno: EAGAIN when the upstream's backlog is full).
int ConnectUnix(const std::string& path, std::string* name);

// Raises the soft limit on open descriptors to the hard limit (each held connection is one).
// Returns the limit in force.
long RaiseFileLimit();

// Reason phrase for the status codes the front answers itself.
const char* ReasonPhrase(int status);

// A complete response with an OpenAI error body {"error":{...}} and "Connection: close".
// 503 also carries "Retry-After: 1".
std::string ErrorResponse(int status, const std::string& message, const std::string& code = "");

}  // namespace bicache::server::front
