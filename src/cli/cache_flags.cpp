#include "cli/cache_flags.h"

#include <algorithm>

#include "cli/commands.h"
#include "cli/sampling_flags.h"
#include "util/error.h"

namespace bicache::cli {

CLI::Option* AddRefreshFlag(CLI::App* cmd, int* refresh, const std::string& help) {
  return cmd->add_option("--refresh", *refresh, help)
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxLengthFlag));
}

CLI::Option* AddCacheBudgetFlag(CLI::App* cmd, double* mb, const std::string& help) {
  return cmd->add_option("--cache-budget-mb", *mb, help)->check(NonNegative());
}

ModeList ParseModesFlag(const std::string& text) {
  ModeList list;
  std::vector<std::string> names;
  std::string cur;
  for (char c : text + ",") {
    if (c == ' ') continue;
    if (c != ',') {
      cur += c;
      continue;
    }
    if (cur.empty())
      throw Error(ErrorKind::kInvalidArgument, "--modes '" + text + "': empty mode name");
    engine::CacheMode m;
    try {
      m = engine::ParseCacheMode(cur);
    } catch (const Error& e) {
      throw Error(e.kind(), std::string("--modes: ") + e.what());
    }
    if (std::find(names.begin(), names.end(), m.ToString()) != names.end())
      throw Error(ErrorKind::kInvalidArgument, "--modes: '" + m.ToString() + "' given twice");
    names.push_back(m.ToString());
    list.any_dual |= m.dual;
    list.modes.push_back(m);
    cur.clear();
  }
  return list;
}

int DefaultBlockLength(int gen_length, bool any_dual) {
  return any_dual && gen_length % 4 == 0 && gen_length >= 4 ? gen_length / 4 : gen_length;
}

}  // namespace bicache::cli
