// Default byte budget for the prefix cache, derived from the memory the machine has free.
//
// Rule: a quarter of MemAvailable (/proc/meminfo), at least 256 MiB and at most 64 GiB, and never
// more than half of MemAvailable (so a small machine is not pushed into swap by the floor). If
// /proc/meminfo cannot be read or has no MemAvailable line, 1 GiB.
// Why a quarter: the cache competes with the weights (mmapped pages are not all "available"), the
// per-request activations and the OS; call it after the model is loaded so the weights' pages are
// already accounted for. A prefix of n tokens costs roughly n * layers * 3 * d_model *
// sizeof(float) for K, V and the boundary hidden state (LLaDA-8B in f32: ~1.5 MB per token if all
// 32 layers are kept).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace bicache::cache {

inline constexpr size_t kBudgetFloorBytes = size_t{256} << 20;
inline constexpr size_t kBudgetCapBytes = size_t{64} << 30;
inline constexpr size_t kBudgetFallbackBytes = size_t{1} << 30;

// MemAvailable in bytes from the text of /proc/meminfo ("MemAvailable:  123456 kB"), or nullopt.
std::optional<size_t> ParseMemAvailableBytes(std::string_view meminfo);
// The rule above applied to a MemAvailable value.
size_t BudgetForAvailableBytes(size_t available_bytes);
// The rule above applied to this machine now.
size_t DefaultBudgetBytes();

}  // namespace bicache::cache
