#include "server/front/sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "server/api_request.h"
#include "util/error.h"

namespace bicache::server::front {

int Listen(const std::string& host, int port, int* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string where = "cannot listen on " + host + ":" + std::to_string(port);
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) {
    throw Error(ErrorKind::kIo, where + " (is the host an address of this machine?)");
  }
  int err = 0, fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    // SO_REUSEADDR alone (no SO_REUSEPORT): a restart binds while old connections sit in
    // TIME_WAIT, and a second server on a port in use fails instead of sharing it.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 4096) != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) throw Error(ErrorKind::kIo, where + ": " + std::strerror(err));
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  *bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

PrivateSocketDir::PrivateSocketDir() {
  // sun_path holds 107 bytes: a long TMPDIR falls back to /tmp.
  std::string base;
  if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0' && std::strlen(t) < 64)
    base = t;
  else
    base = "/tmp";
  std::string templ = base + "/bicache-serve-XXXXXX";
  if (mkdtemp(templ.data()) == nullptr) {
    throw Error(ErrorKind::kIo, "cannot create a private directory for the internal socket in " +
                                    base + ": " + std::strerror(errno));
  }
  dir_ = templ;
  socket_ = dir_ + "/http.sock";
}

PrivateSocketDir::~PrivateSocketDir() {
  unlink(socket_.c_str());
  rmdir(dir_.c_str());
}

int ListenUnix(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string where = "cannot listen on the internal socket " + path;
  if (path.size() >= sizeof(a.sun_path)) throw Error(ErrorKind::kIo, where + ": path too long");
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(ErrorKind::kIo, where + ": " + std::strerror(errno));
  // The directory (0700) is what keeps other users out; 0600 on the socket as well.
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || chmod(path.c_str(), 0600) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    close(fd);
    throw Error(ErrorKind::kIo, where + ": " + std::strerror(err));
  }
  return fd;
}

int ConnectUnix(const std::string& path, std::string* name) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // Binding with only the family asks for autobind: a unique abstract name ("\0" + 5 hex digits).
  socklen_t len = sizeof(sa_family_t);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0) {
    close(fd);
    return -1;
  }
  len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const size_t name_len =
      len > offsetof(sockaddr_un, sun_path) + 1 ? len - offsetof(sockaddr_un, sun_path) - 1 : 0;
  *name = std::string(a.sun_path + 1, name_len);
  sockaddr_un to{};
  to.sun_family = AF_UNIX;
  if (path.size() >= sizeof(to.sun_path)) {
    close(fd);
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(to.sun_path, path.c_str(), path.size() + 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 && errno != EINPROGRESS) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

long RaiseFileLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return -1;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  return static_cast<long>(r.rlim_cur);
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

std::string ErrorResponse(int status, const std::string& message, const std::string& code) {
  ApiError e;
  e.status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.message = message;
  e.code = code;
  const std::string body =
      ErrorBody(e).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + ReasonPhrase(status) + "\r\n";
  out +=
      "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (status == 503) out += "Retry-After: 1\r\n";
  out += "Connection: close\r\n\r\n" + body;
  return out;
}

}  // namespace bicache::server::front
