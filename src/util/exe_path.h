// Files found relative to the running executable, so a binary finds its data without a source
// path compiled in (a build inside the checkout finds the checkout; an install finds share/).
#pragma once

#include <string>
#include <string_view>

namespace bicache {

// The nearest directory at or above the executable's own that holds `relative` (a file or a
// folder), or "" when none does or /proc/self/exe cannot be read.
std::string DirAboveExecutableHolding(std::string_view relative);

}  // namespace bicache
