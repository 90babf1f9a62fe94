// `bicache bench-serve`: load test of the HTTP server -- N concurrent clients sending chat
// completions whose system messages (the held-out suite's prefixes) are shared, per cache mode.
//
// The server runs in this process on a free loopback port (or --url names one already running).
// Every mode is measured on the same server and the same request stream: the modes take turns in
// --rounds rounds (round 1: none, bicache, ..., round 2: none, bicache, ...), each turn sending its
// share of --requests with --clients threads, so a slow stretch of a noisy machine hits every mode.
// A turn ends when its requests are done or its share of --duration has passed (then clients send
// nothing new; requests in flight finish).
//
// Arrival pattern: closed loop by default (each client sends its next request when the previous
// one has answered: the server always has --clients requests). `--rate R` makes it open loop:
// request i of a turn is due at t_i, with exponential gaps of mean 1/R seconds (Poisson arrivals,
// seeded by --seed), and is sent by the first free client at t_i or, when all --clients are busy,
// as soon as one frees (--clients is then the cap on requests in flight). Latency counts from t_i,
// so time a request waited for a free client is included, as a user arriving then would see it.
//
// Definitions (also in docs/benchmarks.md, "Serving load"):
//   tokens/s       = canvas tokens (max_tokens per request; every canvas position is denoised,
//                    as in `bicache bench`) of successful requests / summed turn wall seconds
//   answer tok/s   = usage.completion_tokens (before the stop token) / the same seconds
//   latency        = client-side wall time of one request (queueing included); p50 / p99 nearest
//   rank prefix hit     = vllm:gpu_prefix_cache_hits_total / queries_total over the mode's turns
//   (prompt
//                    tokens served from a cached prefix); request hit = share of responses with
//                    bicache.hit (their prefix entry was found, not built)
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "engine/cache_mode.h"
#include "engine/loaded_model.h"
#include "harness/bench_workload.h"
#include "harness/suite.h"
#include "server/httplib_wrap.h"
#include "server/server.h"
#include "util/error.h"

namespace bicache::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// One mode's accumulated results over its turns.
struct ModeStats {
  std::string name;
  int requests = 0, errors = 0, hits = 0;
  double seconds = 0, canvas_tokens = 0, answer_tokens = 0;
  double prefix_hit_tokens = 0, prefix_query_tokens = 0;
  std::vector<double> latencies_ms;
  std::vector<double> send_delays_ms;      // open loop: how late each request left (no free client)
  std::vector<std::string> error_samples;  // first few error messages
  size_t next = 0;                         // next workload request (cycles)
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// Sum of the samples of `name` (any labels) in Prometheus text.
double Metric(const std::string& text, const std::string& name) {
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

struct Target {
  std::string host;
  int port = 0;
};

Target ParseUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    throw Error(ErrorKind::kInvalidArgument, "--url: expected http://HOST:PORT, got '" + url + "'");
  }
  std::string rest = url.substr(scheme.size());
  if (const size_t slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  const size_t colon = rest.rfind(':');
  Target t;
  t.host = rest.substr(0, colon);
  t.port = colon == std::string::npos ? 80 : std::atoi(rest.c_str() + colon + 1);
  if (t.host.empty() || t.port <= 0 || t.port > 65535) {
    throw Error(ErrorKind::kInvalidArgument, "--url: expected http://HOST:PORT, got '" + url + "'");
  }
  return t;
}

std::string Scrape(const Target& t) {
  httplib::Client c(t.host, t.port);
  c.set_read_timeout(30, 0);
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) throw Error(ErrorKind::kIo, "bench-serve: GET /metrics failed");
  return r->body;
}

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

}  // namespace

Runner AddBenchServe(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench-serve",
                                 "Load-test the HTTP server: concurrent clients, per cache mode");
  struct Opts {
    std::string model, suite, url, json, modes = "none,bicache,dual,bicache+dual";
    int clients = 8, requests = 32, rounds = 2, prefixes = 4, per_prefix = 4, threads = 0;
    int max_tokens = 32, steps = 0, block_length = 0, max_running = 0,
        refresh = engine::kDefaultRefreshInterval;
    double duration = 120, cache_budget_mb = 0, rate = 0;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  o->suite = harness::DefaultSuitePath();
  AddModelFlag(cmd, &o->model);
  AddThreadsFlag(cmd, &o->threads);
  cmd->add_option("--url", o->url,
                  "load an already running server (http://HOST:PORT) instead of starting one");
  cmd->add_option("--suite", o->suite, "task suite JSONL (default: the held-out suite)");
  cmd->add_option("--modes", o->modes,
                  "comma-separated cache modes (default: none,bicache,dual,bicache+dual)");
  cmd->add_option("--clients", o->clients, "concurrent clients")->check(CLI::Range(1, 1024));
  cmd->add_option("--requests", o->requests, "requests per mode")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--duration", o->duration, "seconds per mode at most (split over the rounds)")
      ->check(Positive());
  cmd->add_option("--rounds", o->rounds, "turns per mode, modes alternating")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--prefixes", o->prefixes, "distinct shared prefixes (system messages)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--per-prefix", o->per_prefix, "distinct user turns per prefix")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--max-tokens", o->max_tokens, "max_tokens of every request")
      ->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--steps", o->steps, "denoising steps (default: max_tokens)")
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--block-length", o->block_length,
                  "block length (default: max_tokens/4 with a dual mode, else max_tokens)")
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--refresh", o->refresh,
                  "bicache: refresh interval R sent with every request (0 = off)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--max-running", o->max_running,
                  "in-process server: batch size (default: --clients)")
      ->check(CLI::Range(0, 1 << 12));
  cmd->add_option("--cache-budget-mb", o->cache_budget_mb, "in-process server: prefix cache budget")
      ->check(NonNegative());
  cmd->add_option("--rate", o->rate,
                  "open loop: Poisson arrivals at this many requests/s per turn, --clients in "
                  "flight at most "
                  "(default 0: closed loop, every client sends again as soon as answered)")
      ->check(NonNegative());
  cmd->add_option("--seed", o->seed, "seed of the Poisson arrival times (--rate)");
  cmd->add_option("--json", o->json, "write the results as JSON to this file");
  return [=]() {
    ApplyThreads(o->threads);
    if (!std::isfinite(o->rate) || o->rate > 1e6) {
      throw Error(ErrorKind::kInvalidArgument,
                  "--rate must be a finite number of requests/s up to 1e6");
    }
    signal(SIGPIPE,
           SIG_IGN);  // as in `serve`: a vanished peer is a failed write, not a dead process
    // ---- modes and settings (validated before anything loads) ----
    std::vector<ModeStats> modes;
    bool any_dual = false;
    {
      std::stringstream ss(o->modes);
      for (std::string name; std::getline(ss, name, ',');) {
        if (name.empty()) continue;
        engine::CacheMode m;
        try {
          m = engine::ParseCacheMode(name);
        } catch (const Error& e) {
          throw Error(e.kind(), std::string("--modes: ") + e.what());
        }
        for (const auto& prev : modes) {
          if (prev.name == m.ToString())
            throw Error(ErrorKind::kInvalidArgument, "--modes: '" + name + "' given twice");
        }
        any_dual |= m.dual;
        modes.push_back({});
        modes.back().name = m.ToString();
      }
    }
    if (modes.empty()) throw Error(ErrorKind::kInvalidArgument, "--modes: no mode given");
    int block = o->block_length;
    if (block == 0)
      block = any_dual && o->max_tokens % 4 == 0 && o->max_tokens >= 4 ? o->max_tokens / 4
                                                                       : o->max_tokens;
    const int steps = o->steps > 0 ? o->steps : o->max_tokens;

    // ---- the request stream: the suite's prefixes as system messages ----
    auto lm = engine::LoadedModel::Load(o->model);
    const std::vector<harness::SuiteSample> suite = harness::LoadSuite(o->suite);
    std::vector<double> ratios;
    const int ctx = lm->model().config().context_length;
    for (const auto& s : suite) {
      const engine::Prompt p = harness::SamplePrompt(*lm, s);
      const int n = static_cast<int>(p.tokens.size()) + o->max_tokens;
      ratios.push_back(p.prefix_len > 0 && n <= ctx ? static_cast<double>(p.prefix_len) / n : -1.0);
    }
    const harness::Workload w =
        harness::BuildWorkload(suite, ratios,
                               {o->prefixes, o->per_prefix, harness::RequestOrder::kInterleaved,
                                harness::RatioBand::kAll});
    std::vector<std::string> bodies;  // without the cache field
    double mean_prompt = 0, mean_prefix = 0;
    for (const auto& r : w.requests) {
      const auto& s = suite[r.sample];
      const engine::Prompt p = harness::SamplePrompt(*lm, s);
      mean_prompt += p.tokens.size();
      mean_prefix += p.prefix_len;
      json b = {{"messages", json::array({{{"role", "system"}, {"content", s.prefix}},
                                          {{"role", "user"}, {"content", s.prompt}}})},
                {"max_tokens", o->max_tokens},
                {"steps", steps},
                {"block_length", block},
                {"refresh", o->refresh},
                {"temperature", 0}};
      bodies.push_back(b.dump());
    }
    mean_prompt /= std::max<size_t>(1, w.requests.size());
    mean_prefix /= std::max<size_t>(1, w.requests.size());

    // ---- the server ----
    std::unique_ptr<server::Server> srv;
    std::thread http;
    Target target;
    if (o->url.empty()) {
      server::ServerOptions so;
      so.host = "127.0.0.1";
      so.port = 0;
      so.model_path = lm->path();
      so.max_running = o->max_running > 0 ? o->max_running : o->clients;
      so.max_queue = std::max(64, o->clients * 2);
      so.cache_budget_mb = o->cache_budget_mb;
      so.threads = o->threads;  // 0: the server picks engine::ForwardThreads' default for the model
      so.limits.max_tokens_limit = std::max(so.limits.max_tokens_limit, o->max_tokens);
      so.limits.max_steps = std::max(so.limits.max_steps, steps);
      lm.reset();  // the server loads its own copy
      srv = std::make_unique<server::Server>(so);
      target = {"127.0.0.1", srv->Bind()};
      srv->StartLoading();
      http = std::thread([&] { srv->Serve(); });
      while (!srv->ready()) {
        if (const std::string err = srv->load_error(); !err.empty()) {
          srv->Shutdown(std::chrono::milliseconds(0));
          http.join();
          throw Error(ErrorKind::kModel,
                      "bench-serve: the server could not load the model: " + err);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } else {
      target = ParseUrl(o->url);
    }
    auto stop_server = [&] {
      if (srv) {
        srv->Shutdown(std::chrono::milliseconds(0));
        http.join();
        srv.reset();
      }
    };
    std::fprintf(
        stderr,
        "bench-serve: %s:%d, %zu modes x %d requests, %d clients, %d rounds, %zu prefixes x %d\n",
        target.host.c_str(), target.port, modes.size(), o->requests, o->clients, o->rounds,
        w.groups.size(), o->per_prefix);

    // ---- one turn: `count` requests of one mode from `clients` threads ----
    auto post = [&](httplib::Client& c, const std::string& body, double* ms, json* out,
                    std::string* err) {
      const auto t0 = Clock::now();
      auto r = c.Post("/v1/chat/completions", body, "application/json");
      *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!r) {
        *err = "transport error: " + httplib::to_string(r.error());
        return false;
      }
      if (r->status != 200) {
        *err = "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 200);
        return false;
      }
      try {
        *out = json::parse(r->body);
        return true;
      } catch (const std::exception& e) {
        *err = std::string("bad JSON: ") + e.what();
        return false;
      }
    };
    std::mt19937_64 arrival_rng(o->seed);
    auto turn = [&](ModeStats& m, int count, double seconds) {
      const std::string before = Scrape(target);
      // Open loop: due time of each request, seconds after the turn starts (Poisson process).
      std::vector<double> due(count, 0.0);
      if (o->rate > 0) {
        std::exponential_distribution<double> gap(o->rate);
        double t = 0;
        for (int i = 0; i < count; ++i) due[i] = (t += gap(arrival_rng));
      }
      std::atomic<int> next{0};
      std::mutex mu;
      const auto t0 = Clock::now();
      const auto deadline =
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
      const size_t base = m.next;
      auto client = [&] {
        httplib::Client c(target.host, target.port);
        c.set_read_timeout(600, 0);
        c.set_keep_alive(true);
        for (;;) {
          const int i = next.fetch_add(1);
          if (i >= count) return;
          const auto at = t0 + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(due[i]));
          if (at >= deadline) return;
          std::this_thread::sleep_until(at);
          if (Clock::now() >= deadline) return;
          const double late_ms =
              o->rate > 0 ? std::chrono::duration<double, std::milli>(Clock::now() - at).count()
                          : 0;
          json b = json::parse(bodies[(base + i) % bodies.size()]);
          b["cache"] = m.name;
          double ms = 0;
          json out;
          std::string err;
          const bool ok = post(c, b.dump(), &ms, &out, &err);
          ms += late_ms;  // open loop: latency from the request's due time
          std::lock_guard<std::mutex> l(mu);
          ++m.requests;
          if (o->rate > 0) m.send_delays_ms.push_back(late_ms);
          if (!ok) {
            ++m.errors;
            if (m.error_samples.size() < 5) m.error_samples.push_back(err);
            continue;
          }
          m.latencies_ms.push_back(ms);
          m.canvas_tokens += o->max_tokens;
          m.answer_tokens += out["usage"].value("completion_tokens", 0);
          m.hits += out["bicache"].value("hit", false) ? 1 : 0;
        }
      };
      std::vector<std::thread> threads;
      for (int k = 0; k < o->clients; ++k) threads.emplace_back(client);
      for (auto& t : threads) t.join();
      m.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      m.next = base + static_cast<size_t>(std::min(next.load(), count));
      const std::string after = Scrape(target);
      m.prefix_hit_tokens += Metric(after, "vllm:gpu_prefix_cache_hits_total") -
                             Metric(before, "vllm:gpu_prefix_cache_hits_total");
      m.prefix_query_tokens += Metric(after, "vllm:gpu_prefix_cache_queries_total") -
                               Metric(before, "vllm:gpu_prefix_cache_queries_total");
    };

    const auto wall0 = Clock::now();
    try {
      {  // Untimed warm-up (oneDNN JIT, page-in), charged to no mode.
        httplib::Client c(target.host, target.port);
        c.set_read_timeout(600, 0);
        json b = json::parse(bodies[0]);
        b["cache"] = "none";
        double ms;
        json out;
        std::string err;
        if (!post(c, b.dump(), &ms, &out, &err))
          throw Error(ErrorKind::kIo, "bench-serve: warm-up request failed: " + err);
      }
      for (int r = 0; r < o->rounds; ++r) {
        const int count = o->requests / o->rounds + (r < o->requests % o->rounds ? 1 : 0);
        if (count == 0) continue;
        for (ModeStats& m : modes) {
          turn(m, count, o->duration / o->rounds);
          std::fprintf(stderr, "  round %d %-14s %d requests, %.1fs so far\n", r + 1,
                       m.name.c_str(), m.requests, m.seconds);
        }
      }
    } catch (...) {
      stop_server();
      throw;
    }
    const double wall = std::chrono::duration<double>(Clock::now() - wall0).count();
    const std::string final_metrics = Scrape(target);
    stop_server();

    // ---- report ----
    const ModeStats* none = nullptr;
    for (const auto& m : modes)
      if (m.name == "none") none = &m;
    auto tps = [](const ModeStats& m) { return m.seconds > 0 ? m.canvas_tokens / m.seconds : 0.0; };
    json jmodes = json::object(), vs_none = json::object();
    int total_errors = 0;
    char arrival[160];
    if (o->rate > 0) {
      std::snprintf(arrival, sizeof arrival,
                    "Poisson arrivals at %g req/s (seed %llu), at most %d in flight", o->rate,
                    static_cast<unsigned long long>(o->seed), o->clients);
    } else {
      std::snprintf(arrival, sizeof arrival, "%d clients (closed loop)", o->clients);
    }
    std::printf(
        "%s, %d requests/mode in %d rounds, max_tokens %d, steps %d, block %d, refresh %d, %zu "
        "prefixes x %d, "
        "mean prompt %.0f tokens (prefix %.0f)\n",
        arrival, o->requests, o->rounds, o->max_tokens, steps, block, o->refresh, w.groups.size(),
        o->per_prefix, mean_prompt, mean_prefix);
    std::printf("%-14s %6s %6s %9s %7s %7s %9s %9s %8s %8s\n", "mode", "reqs", "errors", "tok/s",
                "x none", "req/s", "p50 ms", "p99 ms", "pfx hit", "req hit");
    for (const auto& m : modes) {
      const int ok = m.requests - m.errors;
      const double hit =
          m.prefix_query_tokens > 0 ? m.prefix_hit_tokens / m.prefix_query_tokens : 0.0;
      const double ratio = none && tps(*none) > 0 ? tps(m) / tps(*none) : 0.0;
      total_errors += m.errors;
      json j = {{"requests", m.requests},
                {"errors", m.errors},
                {"seconds", m.seconds},
                {"tokens_per_s", tps(m)},
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
      if (none) vs_none[m.name] = ratio;
      jmodes[m.name] = j;
      std::printf("%-14s %6d %6d %9.1f %6.2fx %7.2f %9.0f %9.0f %8.3f %8.3f\n", m.name.c_str(),
                  m.requests, m.errors, tps(m), ratio, j["requests_per_s"].get<double>(),
                  j["p50_ms"].get<double>(), j["p99_ms"].get<double>(), hit,
                  j["request_hit_rate"].get<double>());
      for (const auto& e : m.error_samples) std::printf("    error: %s\n", e.c_str());
    }
    if (!o->json.empty()) {
      json groups = json::array();
      for (const auto& g : w.groups)
        groups.push_back({{"prefix", g.key}, {"family", g.family}, {"ratio", g.ratio}});
      json out = {{"modes", jmodes},
                  {"speedup_vs_none", vs_none},
                  {"errors", total_errors},
                  {"settings",
                   {{"url", o->url.empty() ? "in-process http://" + target.host + ":" +
                                                 std::to_string(target.port)
                                           : o->url},
                    {"model", o->model},
                    {"suite", o->suite},
                    {"clients", o->clients},
                    {"arrival", o->rate > 0 ? "poisson" : "closed"},
                    {"rate", o->rate},
                    {"seed", o->seed},
                    {"requests_per_mode", o->requests},
                    {"rounds", o->rounds},
                    {"duration_s", o->duration},
                    {"max_tokens", o->max_tokens},
                    {"steps", steps},
                    {"block_length", block},
                    {"refresh", o->refresh},
                    {"prefixes", w.groups.size()},
                    {"per_prefix", o->per_prefix},
                    {"mean_prompt_tokens", mean_prompt},
                    {"mean_prefix_tokens", mean_prefix},
                    {"threads", o->threads},
                    {"wall_seconds", wall},
                    {"groups", groups}}},
                  {"machine", {{"cpu", CpuName()}, {"cores", std::thread::hardware_concurrency()}}},
                  {"server_after",
                   {{"running", Metric(final_metrics, "vllm:num_requests_running")},
                    {"waiting", Metric(final_metrics, "vllm:num_requests_waiting")},
                    {"pinned_bytes", Metric(final_metrics, "bicache_cache_pinned_bytes")},
                    {"failed", Metric(final_metrics, "bicache_requests_failed_total")}}}};
      std::ofstream f(o->json);
      f << out.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
      if (!f) throw Error(ErrorKind::kIo, "--json: cannot write '" + o->json + "'");
    }
    return total_errors == 0 ? 0 : 1;
  };
}

static CommandRegistrar register_bench_serve(AddBenchServe, 82);

}  // namespace bicache::cli
