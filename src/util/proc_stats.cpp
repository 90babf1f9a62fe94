#include "util/proc_stats.h"

#include <fstream>
#include <string>

namespace bicache {
namespace {

// The "<key>:   N kB" line of /proc/self/status, in bytes.
std::optional<uint64_t> StatusKb(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    try {
      return std::stoull(line.substr(key.size() + 1)) * 1024;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> PeakRssBytes() {
  return StatusKb("VmHWM");
}
std::optional<uint64_t> CurrentRssBytes() {
  return StatusKb("VmRSS");
}

}  // namespace bicache
