// `bicache bench`'s output, from a BenchReport: the JSON document (--json), the table on stdout
// and the plot (--svg). Definitions (also in docs/benchmarks.md):
//   tokens/s        = requests x gen_length canvas tokens / summed wall seconds of Engine::Run
//                     (prefix builds on misses included). Every position of the canvas is
//                     denoised whatever the stop token, so this is the work-normalised rate the
//                     paper reports (generated tokens / wall time).
//   answer tokens/s = answer tokens (before the first stop token) / the same seconds.
//   agreement       = share of requests whose answer is token-for-token the `none` answer.
//   delta accuracy  = accuracy(mode) - accuracy(baseline) on the same requests (a fraction in the
//                     JSON, points in the table), with Newcombe's paired 95% interval and the
//                     exact McNemar p (harness/paired_stats.h); baseline `none`, and `dual` for
//                     bicache+dual.
//   trade-off       = per mode but none and per scope (all, and each band with --ratio-band
//                     sweep): speed-up over none against delta accuracy with its interval, in the
//                     text and as the SVG's middle panel; the `bench --depth-tables` sweep adds a
//                     mode per depth table to it (each carries "depth_table": path, criterion,
//                     threshold, max_depth, points).
//   hit rate        = prefix-store hits / lookups (Engine::cache_stats); the first request of each
//                     prefix misses and builds, so M requests per prefix cap it at (M-1)/M.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "harness/bench.h"

namespace bicache::harness {

// {"modes", "speedup_vs_none", "speedup_vs_dual", "settings", "depth_table", "efficiency",
// "targets"}: everything the table prints is read back from it. Each mode carries "correct" (0/1
// per request, in request order) and "vs_none" / "vs_dual" (paired accuracy,
// harness/paired_stats.h), overall and in "by_band".
nlohmann::json BenchJson(const BenchReport& report);
// The table on stdout; `doc` is BenchJson(report).
void PrintBenchText(const BenchReport& report, const nlohmann::json& doc);
// Throughput vs accuracy per mode, the trade-off vs none (when none ran) + the calibration curves;
// Error(kIo) when it cannot be written.
void WriteBenchPlot(const std::string& path, const BenchReport& report, const nlohmann::json& doc);

}  // namespace bicache::harness
