// Process memory figures from /proc/self/status (Linux). Resident sizes include the pages of
// memory-mapped model files that were touched, which is what a user's machine has to hold.
#pragma once

#include <cstdint>
#include <optional>

namespace bicache {

// Peak resident set size (VmHWM) and current resident set size (VmRSS) in bytes; nullopt where
// /proc is not available.
std::optional<uint64_t> PeakRssBytes();
std::optional<uint64_t> CurrentRssBytes();

}  // namespace bicache
