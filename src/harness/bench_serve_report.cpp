#include "harness/bench_serve_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <sstream>
#include <thread>

namespace bicache::harness {
namespace {

using nlohmann::json;

std::string CpuName() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      return c == std::string::npos ? line : line.substr(c + 2);
    }
  }
  return "unknown";
}

double TokensPerSecond(const ServeModeStats& m) {
  return m.seconds > 0 ? m.canvas_tokens / m.seconds : 0.0;
}

const ServeModeStats* FindNone(const BenchServeReport& report) {
  const ServeModeStats* none = nullptr;
  for (const auto& m : report.modes)
    if (m.name == "none") none = &m;
  return none;
}

json ModeJson(const ServeModeStats& m) {
  const int ok = m.requests - m.errors;
  const double hit = m.prefix_query_tokens > 0 ? m.prefix_hit_tokens / m.prefix_query_tokens : 0.0;
  return {{"requests", m.requests},
          {"errors", m.errors},
          {"seconds", m.seconds},
          {"tokens_per_s", TokensPerSecond(m)},
          {"answer_tokens_per_s", m.seconds > 0 ? m.answer_tokens / m.seconds : 0.0},
          {"requests_per_s", m.seconds > 0 ? ok / m.seconds : 0.0},
          {"p50_ms", Percentile(m.latencies_ms, 50)},
          {"p99_ms", Percentile(m.latencies_ms, 99)},
          {"prefix_hit_rate", hit},
          {"prefix_hit_tokens", m.prefix_hit_tokens},
          {"prefix_query_tokens", m.prefix_query_tokens},
          {"request_hit_rate", ok > 0 ? static_cast<double>(m.hits) / ok : 0.0},
          {"mean_send_delay_ms",
           m.send_delays_ms.empty()
               ? 0.0
               : std::accumulate(m.send_delays_ms.begin(), m.send_delays_ms.end(), 0.0) /
                     m.send_delays_ms.size()},
          {"error_samples", m.error_samples}};
}

json SettingsJson(const BenchServeReport& report) {
  const BenchServeOptions& o = report.options;
  json groups = json::array();
  for (const auto& g : report.groups)
    groups.push_back({{"prefix", g.key}, {"family", g.family}, {"ratio", g.ratio}});
  return {
      {"url", o.url.empty() ? "in-process http://" + report.host + ":" + std::to_string(report.port)
                            : o.url},
      {"model", o.model},
      {"suite", o.suite},
      {"clients", o.clients},
      {"arrival", o.rate > 0 ? "poisson" : "closed"},
      {"rate", o.rate},
      {"seed", o.seed},
      {"requests_per_mode", o.requests},
      {"rounds", o.rounds},
      {"duration_s", o.duration},
      {"max_tokens", o.max_tokens},
      {"steps", o.steps},
      {"block_length", o.block_length},
      {"refresh", o.refresh},
      {"prefixes", report.groups.size()},
      {"per_prefix", o.per_prefix},
      {"mean_prompt_tokens", report.mean_prompt},
      {"mean_prefix_tokens", report.mean_prefix},
      {"threads", o.threads},
      {"wall_seconds", report.wall_seconds},
      {"groups", groups}};
}

}  // namespace

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

double PrometheusSum(const std::string& text, const std::string& name) {
  double sum = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    const char c = line[name.size()];
    if (c != '{' && c != ' ') continue;
    const size_t sp = line.rfind(' ');
    if (sp != std::string::npos) sum += std::atof(line.c_str() + sp + 1);
  }
  return sum;
}

json BenchServeJson(const BenchServeReport& report) {
  const ServeModeStats* none = FindNone(report);
  json jmodes = json::object(), vs_none = json::object();
  int total_errors = 0;
  for (const auto& m : report.modes) {
    total_errors += m.errors;
    jmodes[m.name] = ModeJson(m);
    if (none) {
      vs_none[m.name] =
          TokensPerSecond(*none) > 0 ? TokensPerSecond(m) / TokensPerSecond(*none) : 0.0;
    }
  }
  const std::string& fm = report.final_metrics;
  return {{"modes", jmodes},
          {"speedup_vs_none", vs_none},
          {"errors", total_errors},
          {"settings", SettingsJson(report)},
          {"machine", {{"cpu", CpuName()}, {"cores", std::thread::hardware_concurrency()}}},
          {"server_after",
           {{"running", PrometheusSum(fm, "vllm:num_requests_running")},
            {"waiting", PrometheusSum(fm, "vllm:num_requests_waiting")},
            {"pinned_bytes", PrometheusSum(fm, "bicache_cache_pinned_bytes")},
            {"failed", PrometheusSum(fm, "bicache_requests_failed_total")}}}};
}

void PrintBenchServeText(const BenchServeReport& report, const json& doc) {
  const BenchServeOptions& o = report.options;
  const ServeModeStats* none = FindNone(report);
  char arrival[160];
  if (o.rate > 0) {
    std::snprintf(arrival, sizeof arrival,
                  "Poisson arrivals at %g req/s (seed %llu), at most %d in flight", o.rate,
                  static_cast<unsigned long long>(o.seed), o.clients);
  } else {
    std::snprintf(arrival, sizeof arrival, "%d clients (closed loop)", o.clients);
  }
  std::printf(
      "%s, %d requests/mode in %d rounds, max_tokens %d, steps %d, block %d, refresh %d, %zu "
      "prefixes x %d, "
      "mean prompt %.0f tokens (prefix %.0f)\n",
      arrival, o.requests, o.rounds, o.max_tokens, o.steps, o.block_length, o.refresh,
      report.groups.size(), o.per_prefix, report.mean_prompt, report.mean_prefix);
  std::printf("%-14s %6s %6s %9s %7s %7s %9s %9s %8s %8s\n", "mode", "reqs", "errors", "tok/s",
              "x none", "req/s", "p50 ms", "p99 ms", "pfx hit", "req hit");
  for (const auto& m : report.modes) {
    const json& j = doc["modes"][m.name];
    const double ratio =
        none && TokensPerSecond(*none) > 0 ? TokensPerSecond(m) / TokensPerSecond(*none) : 0.0;
    std::printf("%-14s %6d %6d %9.1f %6.2fx %7.2f %9.0f %9.0f %8.3f %8.3f\n", m.name.c_str(),
                m.requests, m.errors, TokensPerSecond(m), ratio, j["requests_per_s"].get<double>(),
                j["p50_ms"].get<double>(), j["p99_ms"].get<double>(),
                j["prefix_hit_rate"].get<double>(), j["request_hit_rate"].get<double>());
    for (const auto& e : m.error_samples) std::printf("    error: %s\n", e.c_str());
  }
}

}  // namespace bicache::harness
