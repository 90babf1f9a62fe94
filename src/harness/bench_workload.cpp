#include "harness/bench_workload.h"

#include <algorithm>
#include <map>

#include "util/error.h"
#include "util/field_error.h"

namespace bicache::harness {
namespace {

// Picks `want` groups from `pool` (indices into `groups`): round-robin over families, evenly
// spaced by ratio inside each family. Returns them in round-robin family order.
std::vector<int> SpreadPick(const std::vector<WorkloadGroup>& groups, const std::vector<int>& pool,
                            int want) {
  std::vector<std::string> fams;
  std::map<std::string, std::vector<int>> by_family;
  for (int g : pool) {
    if (!by_family.count(groups[g].family)) fams.push_back(groups[g].family);
    by_family[groups[g].family].push_back(g);
  }
  // How many each family gives: round-robin while families still have groups left.
  std::map<std::string, int> count;
  for (int taken = 0; taken < want;) {
    bool any = false;
    for (const auto& f : fams) {
      if (taken == want) break;
      if (count[f] < static_cast<int>(by_family[f].size())) {
        ++count[f];
        ++taken;
        any = true;
      }
    }
    if (!any) break;  // caller checked the pool is large enough
  }
  std::map<std::string, std::vector<int>> picked;
  for (const auto& f : fams) {
    auto list = by_family[f];
    std::stable_sort(list.begin(), list.end(),
                     [&](int a, int b) { return groups[a].ratio < groups[b].ratio; });
    const int n = static_cast<int>(list.size()), c = count[f];
    for (int j = 0; j < c; ++j) picked[f].push_back(list[static_cast<size_t>((j + 0.5) * n / c)]);
  }
  std::vector<int> out;
  for (size_t round = 0; static_cast<int>(out.size()) < want; ++round) {
    for (const auto& f : fams) {
      if (round < picked[f].size()) out.push_back(picked[f][round]);
    }
  }
  return out;
}

}  // namespace

RequestOrder ParseRequestOrder(std::string_view text) {
  if (text == "interleaved") return RequestOrder::kInterleaved;
  if (text == "grouped") return RequestOrder::kGrouped;
  throw FieldError(ErrorKind::kInvalidArgument,
                   "{order} '" + std::string(text) + "': expected interleaved or grouped");
}

RatioBand ParseRatioBand(std::string_view text) {
  if (text == "all") return RatioBand::kAll;
  if (text == "short") return RatioBand::kShort;
  if (text == "long") return RatioBand::kLong;
  if (text == "sweep") return RatioBand::kSweep;
  throw FieldError(ErrorKind::kInvalidArgument,
                   "{ratio_band} '" + std::string(text) + "': expected all, short, long or sweep");
}

const char* RequestOrderName(RequestOrder order) {
  return order == RequestOrder::kGrouped ? "grouped" : "interleaved";
}

const char* RatioBandName(RatioBand band) {
  switch (band) {
    case RatioBand::kAll:
      return "all";
    case RatioBand::kShort:
      return "short";
    case RatioBand::kLong:
      return "long";
    case RatioBand::kSweep:
      return "sweep";
  }
  return "all";
}

Workload BuildWorkload(const std::vector<SuiteSample>& suite, std::span<const double> ratios,
                       const WorkloadOptions& opt) {
  if (ratios.size() != suite.size()) {
    throw Error(ErrorKind::kInvalidArgument, "BuildWorkload: " + std::to_string(ratios.size()) +
                                                 " ratios for " + std::to_string(suite.size()) +
                                                 " suite samples");
  }
  if (opt.prefixes < 0) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{prefixes} must be >= 0 (0 = every usable prefix group)");
  }
  if (opt.per_prefix < 1)
    throw FieldError(ErrorKind::kInvalidArgument, "{per_prefix} must be >= 1");
  // Unusable samples have a negative ratio (they do not fit the context with the canvas); when none
  // fits, the generation length is what to change, not the prefix counts.
  if (!suite.empty() &&
      std::none_of(ratios.begin(), ratios.end(), [](double r) { return r >= 0; })) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "none of the suite's " + std::to_string(suite.size()) +
                         " samples fits the model's context with the "
                         "generation length asked for (lower {gen_length}; "
                         "bench-serve: {max_tokens})");
  }

  // Qualifying groups, in first-appearance order.
  std::vector<WorkloadGroup> groups;
  std::map<std::string, int> index;
  for (size_t i = 0; i < suite.size(); ++i) {
    if (!(ratios[i] >= 0)) continue;  // unusable (also NaN)
    const std::string key = suite[i].prefix_id.empty() ? suite[i].prefix : suite[i].prefix_id;
    auto [it, fresh] = index.emplace(key, static_cast<int>(groups.size()));
    if (fresh) groups.push_back({key, suite[i].family, "all", 0, {}});
    WorkloadGroup& g = groups[it->second];
    if (static_cast<int>(g.samples.size()) < opt.per_prefix) g.samples.push_back(i);
  }
  std::erase_if(groups, [&](const WorkloadGroup& g) {
    return static_cast<int>(g.samples.size()) < opt.per_prefix;
  });
  for (auto& g : groups) {
    double sum = 0;
    for (size_t i : g.samples) sum += ratios[i];
    g.ratio = sum / g.samples.size();
  }

  // Bands: split at the median group ratio.
  std::vector<int> all, shorts, longs;
  std::vector<double> sorted;
  for (const auto& g : groups) sorted.push_back(g.ratio);
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
    all.push_back(g);
    (groups[g].ratio < median ? shorts : longs).push_back(g);
  }

  auto need = [&](const std::vector<int>& pool, const char* what) {
    if (static_cast<int>(pool.size()) < std::max(1, opt.prefixes)) {
      throw FieldError(ErrorKind::kInvalidArgument,
                       "{prefixes} " + std::to_string(opt.prefixes) + " {per_prefix} " +
                           std::to_string(opt.per_prefix) + ": the suite has only " +
                           std::to_string(pool.size()) + " usable prefix groups " + what +
                           " with that many requests each (lower {prefixes} or {per_prefix})");
    }
  };
  std::vector<int> chosen;
  std::vector<std::string> band_of;
  auto take = [&](const std::vector<int>& pool, const char* band, const char* what) {
    need(pool, what);
    const int want = opt.prefixes == 0 ? static_cast<int>(pool.size()) : opt.prefixes;
    for (int g : SpreadPick(groups, pool, want)) {
      chosen.push_back(g);
      band_of.push_back(band);
    }
  };
  switch (opt.band) {
    case RatioBand::kAll:
      take(all, "all", "in total");
      break;
    case RatioBand::kShort:
      take(shorts, "short", "in the short-prefix half ({ratio_band} short)");
      break;
    case RatioBand::kLong:
      take(longs, "long", "in the long-prefix half ({ratio_band} long)");
      break;
    case RatioBand::kSweep:
      take(shorts, "short", "in the short-prefix half ({ratio_band} sweep)");
      take(longs, "long", "in the long-prefix half ({ratio_band} sweep)");
      break;
  }

  Workload w;
  for (size_t j = 0; j < chosen.size(); ++j) {
    w.groups.push_back(groups[chosen[j]]);
    w.groups.back().band = band_of[j];
  }
  const int G = static_cast<int>(w.groups.size()), M = opt.per_prefix;
  if (opt.order == RequestOrder::kInterleaved) {
    for (int r = 0; r < M; ++r)
      for (int g = 0; g < G; ++g) w.requests.push_back({w.groups[g].samples[r], g, r});
  } else {
    for (int g = 0; g < G; ++g)
      for (int r = 0; r < M; ++r) w.requests.push_back({w.groups[g].samples[r], g, r});
  }
  return w;
}

}  // namespace bicache::harness
