#include "server/connection_watch.h"

#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace bicache::server {
namespace {

// True when `fd` is a Unix-domain socket whose peer is bound to the abstract name `name`.
bool PeerIs(int fd, const std::string& name) {
  sockaddr_un peer{};
  socklen_t len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  constexpr size_t kPath = offsetof(sockaddr_un, sun_path);
  if (peer.sun_family != AF_UNIX || len != kPath + 1 + name.size() || peer.sun_path[0] != '\0')
    return false;
  return std::memcmp(peer.sun_path + 1, name.data(), name.size()) == 0;
}

}  // namespace

std::optional<ConnectionWatch> ConnectionWatch::Find(const httplib::Request& req) {
  const std::string name = req.get_header_value(front::kRelayHeader);
  if (name.empty() || name.size() > 16) return std::nullopt;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return std::nullopt;
  std::optional<ConnectionWatch> found;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd < 0 || fd == dirfd(dir)) continue;
    if (PeerIs(static_cast<int>(fd), name)) {
      found = ConnectionWatch(static_cast<int>(fd));
      break;
    }
  }
  closedir(dir);
  return found;
}

bool ConnectionWatch::PeerGone() const {
  pollfd p{};
  p.fd = fd_;
  p.events = POLLRDHUP;  // pending request bytes (POLLIN) alone do not count: pipelining is legal
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace bicache::server
