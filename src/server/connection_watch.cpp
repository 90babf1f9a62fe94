#include "server/connection_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace bicache::server {
namespace {

// A socket address as (numeric host, port); false for anything but IPv4/IPv6.
bool HostPort(const sockaddr_storage& a, std::string* host, int* port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    if (!inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf)) return false;
    *port = ntohs(in->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    if (!inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf)) return false;
    *port = ntohs(in6->sin6_port);
  } else {
    return false;
  }
  *host = buf;
  return true;
}

// httplib reports addresses through getnameinfo(NI_NUMERICHOST); inet_ntop writes the same text
// for plain addresses. Ports are compared as numbers, hosts as text.
bool Matches(int fd, const httplib::Request& req) {
  sockaddr_storage local{}, peer{};
  socklen_t ll = sizeof local, pl = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) != 0) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
    return false;  // also: not connected
  std::string lh, ph;
  int lp = -1, pp = -1;
  if (!HostPort(local, &lh, &lp) || !HostPort(peer, &ph, &pp)) return false;
  return lp == req.local_port && pp == req.remote_port && lh == req.local_addr &&
         ph == req.remote_addr;
}

}  // namespace

std::optional<ConnectionWatch> ConnectionWatch::Find(const httplib::Request& req) {
  if (req.remote_port <= 0 || req.local_port <= 0) return std::nullopt;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return std::nullopt;
  std::optional<ConnectionWatch> found;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd < 0 || fd == dirfd(dir)) continue;
    if (Matches(static_cast<int>(fd), req)) {
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
