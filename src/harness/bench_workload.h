// The request stream `bicache bench` replays: P distinct shared prefixes x M requests each, drawn
// from the task suite. Model-free: the caller says, per suite sample, what its prefix ratio is
// (tokens need the model's tokenizer) or that the sample cannot run at all.
//
// Choice of prefixes:
//  * A prefix group is the suite's prefix_id (or, when a sample has none, its prefix text). Only
//    groups with at least M usable samples qualify; each contributes its first M usable samples.
//  * Ratio band: the qualifying groups are split at the median of their mean prefix ratio into
//    "short" (< median) and "long" (>= median). `all` draws from every group, `short` / `long`
//    from one half, `sweep` takes P from each half (2P groups), so one run shows how the gain
//    grows with the prefix ratio.
//  * P = 0 takes every qualifying group of the pool (the default of `bicache bench`: the whole
//    held-out suite, so one differing answer moves accuracy by well under a point).
//  * Within a pool, the P groups are spread over the families (round-robin in first-appearance
//    order) and, inside a family, evenly over its groups sorted by ratio (not just the shortest).
//
// Order of requests (documented in docs/benchmarks.md):
//  * interleaved (default): A1 B1 C1 .. A2 B2 C2 .. -- the first round builds every prefix entry
//    (cold), every later round hits (warm); other prefixes arrive between two uses of one entry,
//    as in a server with several tenants.
//  * grouped: A1 A2 .. B1 B2 .. -- each entry is reused immediately (best case for an LRU store).
// Either way the cache is warm after the first request of each prefix.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "harness/suite.h"

namespace bicache::harness {

enum class RequestOrder { kInterleaved, kGrouped };
enum class RatioBand { kAll, kShort, kLong, kSweep };

// Parse "interleaved"/"grouped" and "all"/"short"/"long"/"sweep"; throw Error(kInvalidArgument)
// naming the flag (--order, --ratio-band) and the valid values.
RequestOrder ParseRequestOrder(std::string_view text);
RatioBand ParseRatioBand(std::string_view text);
const char* RequestOrderName(RequestOrder order);
const char* RatioBandName(RatioBand band);

struct WorkloadOptions {
  int prefixes = 0;    // P (per band with kSweep); 0 = every qualifying group of the pool
  int per_prefix = 4;  // M
  RequestOrder order = RequestOrder::kInterleaved;
  RatioBand band = RatioBand::kAll;
};

struct WorkloadGroup {
  std::string key;              // prefix_id, or the prefix text when the suite has none
  std::string family;           // family of its first sample
  std::string band;             // "all", "short" or "long"
  double ratio = 0;             // mean prefix ratio of its chosen samples
  std::vector<size_t> samples;  // M suite indices, suite order
};

struct WorkloadRequest {
  size_t sample = 0;  // suite index
  int group = 0;      // index into Workload::groups
  int round = 0;      // 0 = first use of its prefix (cold), 1.. = reuses
};

struct Workload {
  std::vector<WorkloadGroup> groups;
  std::vector<WorkloadRequest> requests;  // in replay order
};

// `ratios[i]`: prefix ratio of suite sample i in [0, 1], or < 0 (or NaN) when it cannot run (too
// long for the context, no prefix). Throws Error(kInvalidArgument) naming --prefixes /
// --per-prefix / --ratio-band when the suite cannot supply the requested workload.
Workload BuildWorkload(const std::vector<SuiteSample>& suite, std::span<const double> ratios,
                       const WorkloadOptions& options);

}  // namespace bicache::harness
