#include "cache/memory_budget.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace bicache::cache {

std::optional<size_t> ParseMemAvailableBytes(std::string_view meminfo) {
  constexpr std::string_view kKey = "MemAvailable:";
  size_t line_start = 0;
  while (line_start < meminfo.size()) {
    size_t line_end = meminfo.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = meminfo.size();
    std::string_view line = meminfo.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (!line.starts_with(kKey)) continue;
    line.remove_prefix(kKey.size());
    const size_t digits = line.find_first_not_of(' ');
    if (digits == std::string_view::npos) return std::nullopt;
    line.remove_prefix(digits);
    size_t kib = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), kib);
    if (ec != std::errc() || end == line.data()) return std::nullopt;
    const std::string_view unit(end, line.data() + line.size() - end);
    if (unit.find("kB") == std::string_view::npos)
      return std::nullopt;  // the kernel always says kB
    if (kib > SIZE_MAX / 1024) return SIZE_MAX;
    return kib * 1024;
  }
  return std::nullopt;
}

size_t BudgetForAvailableBytes(size_t available_bytes) {
  const size_t share = std::clamp(available_bytes / 4, kBudgetFloorBytes, kBudgetCapBytes);
  return std::min(share, available_bytes / 2);
}

size_t DefaultBudgetBytes() {
  std::ifstream file("/proc/meminfo");
  if (!file) return kBudgetFallbackBytes;
  std::ostringstream text;
  text << file.rdbuf();
  const std::optional<size_t> available = ParseMemAvailableBytes(text.str());
  return available ? BudgetForAvailableBytes(*available) : kBudgetFallbackBytes;
}

}  // namespace bicache::cache
