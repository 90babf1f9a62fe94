// Cache flags that several commands share (generate/eval/bench through SamplingFlags, bench-serve):
// each registered or parsed here once, with one range and one set of error messages. (`serve`
// still registers its own --refresh and --cache-budget-mb, with the same ranges.)
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "engine/cache_mode.h"

namespace bicache::cli {

// --refresh R: 0 .. 2^20 (0 = every step).
CLI::Option* AddRefreshFlag(CLI::App* cmd, int* refresh, const std::string& help);
// --cache-budget-mb MB: >= 0 (0 = the default: 25% of free memory).
CLI::Option* AddCacheBudgetFlag(CLI::App* cmd, double* mb, const std::string& help);

// bench's and bench-serve's --modes: comma-separated cache modes, spaces ignored. Error
// (kInvalidArgument, naming --modes) for an empty name, an unknown mode or a mode given twice
// (under any spelling: "fixed:2" and "fixed:02" are one mode).
struct ModeList {
  std::vector<engine::CacheMode> modes;  // in the order given
  bool any_dual = false;                 // one of them uses the dual cache
};
ModeList ParseModesFlag(const std::string& text);

// The block length bench and bench-serve use without --block-length: gen/4 when a dual mode runs
// and gen is a multiple of 4 (so the dual cache has block starts to rebuild at: one block = no
// reuse between blocks), else gen.
int DefaultBlockLength(int gen_length, bool any_dual);

}  // namespace bicache::cli
