#include "util/exe_path.h"

#include <filesystem>
#include <system_error>

namespace bicache {

std::string DirAboveExecutableHolding(std::string_view relative) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / relative, ec)) return dir.string();
    if (dir == dir.root_path()) break;
  }
  return "";
}

}  // namespace bicache
