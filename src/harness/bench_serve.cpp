#include "harness/bench_serve.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "harness/bench_serve_report.h"
#include "harness/http_client.h"
#include "harness/suite.h"
#include "server/server.h"
#include "util/error.h"
#include "util/field_error.h"

namespace bicache::harness {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Target {
  std::string host;
  int port = 0;
};

Target ParseUrl(const std::string& url) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{url}: expected http://HOST:PORT, got '" + url + "'");
  }
  std::string rest = url.substr(scheme.size());
  if (const size_t slash = rest.find('/'); slash != std::string::npos) rest.resize(slash);
  const size_t colon = rest.rfind(':');
  Target t;
  t.host = rest.substr(0, colon);
  t.port = colon == std::string::npos ? 80 : std::atoi(rest.c_str() + colon + 1);
  if (t.host.empty() || t.port <= 0 || t.port > 65535) {
    throw FieldError(ErrorKind::kInvalidArgument,
                     "{url}: expected http://HOST:PORT, got '" + url + "'");
  }
  return t;
}

std::string Scrape(const Target& t) {
  HttpClient c(t.host, t.port, std::chrono::seconds(30));
  HttpResult r = c.Get("/metrics");
  if (!r.ok || r.status != 200) throw Error(ErrorKind::kIo, "bench-serve: GET /metrics failed");
  return r.body;
}

// The server in this process, on a free loopback port; stopped (no grace) by Stop or on scope exit.
class LocalServer {
 public:
  // Returns once the model has loaded; Error(kModel) when it could not.
  Target Start(const BenchServeOptions& o, const std::string& model_path) {
    server::ServerOptions so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.model_path = model_path;
    so.max_running = o.max_running > 0 ? o.max_running : o.clients;
    so.max_queue = std::max(64, o.clients * 2);
    so.cache_budget_mb = o.cache_budget_mb;
    so.threads = o.threads;  // 0: the server picks engine::ForwardThreads' default for the model
    so.limits.max_tokens_limit = std::max(so.limits.max_tokens_limit, o.max_tokens);
    so.limits.max_steps = std::max(so.limits.max_steps, o.steps);
    srv_ = std::make_unique<server::Server>(so);
    const Target target{"127.0.0.1", srv_->Bind()};
    srv_->StartLoading();
    http_ = std::thread([this] { srv_->Serve(); });
    while (!srv_->ready()) {
      if (const std::string err = srv_->load_error(); !err.empty()) {
        Stop();
        throw Error(ErrorKind::kModel, "bench-serve: the server could not load the model: " + err);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return target;
  }
  void Stop() {
    if (srv_) {
      srv_->Shutdown(std::chrono::milliseconds(0));
      http_.join();
      srv_.reset();
    }
  }
  ~LocalServer() { Stop(); }

 private:
  std::unique_ptr<server::Server> srv_;
  std::thread http_;
};

// One chat completion; false with `err` set on a transport error, a non-200 or a bad body.
bool Post(HttpClient& c, const std::string& body, double* ms, json* out, std::string* err) {
  const auto t0 = Clock::now();
  HttpResult r = c.Post("/v1/chat/completions", body);
  *ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!r.ok) {
    *err = "transport error: " + r.error;
    return false;
  }
  if (r.status != 200) {
    *err = "HTTP " + std::to_string(r.status) + ": " + r.body.substr(0, 200);
    return false;
  }
  try {
    *out = json::parse(r.body);
    return true;
  } catch (const std::exception& e) {
    *err = std::string("bad JSON: ") + e.what();
    return false;
  }
}

// The request stream: per workload request, its chat body without the cache field.
std::vector<std::string> BuildBodies(const BenchServeOptions& o, const engine::LoadedModel& lm,
                                     BenchServeReport& report) {
  const std::vector<SuiteSample> suite = LoadSuite(o.suite);
  std::vector<double> ratios;
  const int ctx = lm.model().config().context_length;
  for (const auto& s : suite) {
    const engine::Prompt p = SamplePrompt(lm, s);
    const int n = static_cast<int>(p.tokens.size()) + o.max_tokens;
    ratios.push_back(p.prefix_len > 0 && n <= ctx ? static_cast<double>(p.prefix_len) / n : -1.0);
  }
  const Workload w = BuildWorkload(
      suite, ratios, {o.prefixes, o.per_prefix, RequestOrder::kInterleaved, RatioBand::kAll});
  std::vector<std::string> bodies;
  for (const auto& r : w.requests) {
    const auto& s = suite[r.sample];
    const engine::Prompt p = SamplePrompt(lm, s);
    report.mean_prompt += p.tokens.size();
    report.mean_prefix += p.prefix_len;
    json b = {{"messages", json::array({{{"role", "system"}, {"content", s.prefix}},
                                        {{"role", "user"}, {"content", s.prompt}}})},
              {"max_tokens", o.max_tokens},
              {"steps", o.steps},
              {"block_length", o.block_length},
              {"refresh", o.refresh},
              {"temperature", 0}};
    bodies.push_back(b.dump());
  }
  report.mean_prompt /= std::max<size_t>(1, w.requests.size());
  report.mean_prefix /= std::max<size_t>(1, w.requests.size());
  report.groups = w.groups;
  return bodies;
}

// One turn: `count` requests of mode `m` from o.clients threads, for at most `seconds`.
void RunTurn(const BenchServeOptions& o, const Target& target,
             const std::vector<std::string>& bodies, std::mt19937_64& arrival_rng,
             ServeModeStats& m, int count, double seconds) {
  const std::string before = Scrape(target);
  // Open loop: due time of each request, seconds after the turn starts (Poisson process).
  std::vector<double> due(count, 0.0);
  if (o.rate > 0) {
    std::exponential_distribution<double> gap(o.rate);
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
    HttpClient c(target.host, target.port, std::chrono::seconds(600));
    for (;;) {
      const int i = next.fetch_add(1);
      if (i >= count) return;
      const auto at =
          t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(due[i]));
      if (at >= deadline) return;
      std::this_thread::sleep_until(at);
      if (Clock::now() >= deadline) return;
      const double late_ms =
          o.rate > 0 ? std::chrono::duration<double, std::milli>(Clock::now() - at).count() : 0;
      json b = json::parse(bodies[(base + i) % bodies.size()]);
      b["cache"] = m.name;
      double ms = 0;
      json out;
      std::string err;
      const bool ok = Post(c, b.dump(), &ms, &out, &err);
      ms += late_ms;  // open loop: latency from the request's due time
      std::lock_guard<std::mutex> l(mu);
      ++m.requests;
      if (o.rate > 0) m.send_delays_ms.push_back(late_ms);
      if (!ok) {
        ++m.errors;
        if (m.error_samples.size() < 5) m.error_samples.push_back(err);
        continue;
      }
      m.latencies_ms.push_back(ms);
      m.canvas_tokens += o.max_tokens;
      m.answer_tokens += out["usage"].value("completion_tokens", 0);
      m.hits += out["bicache"].value("hit", false) ? 1 : 0;
    }
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < o.clients; ++k) threads.emplace_back(client);
  for (auto& t : threads) t.join();
  m.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  m.next = base + static_cast<size_t>(std::min(next.load(), count));
  const std::string after = Scrape(target);
  m.prefix_hit_tokens += PrometheusSum(after, "vllm:gpu_prefix_cache_hits_total") -
                         PrometheusSum(before, "vllm:gpu_prefix_cache_hits_total");
  m.prefix_query_tokens += PrometheusSum(after, "vllm:gpu_prefix_cache_queries_total") -
                           PrometheusSum(before, "vllm:gpu_prefix_cache_queries_total");
}

// Untimed warm-up (oneDNN JIT, page-in), charged to no mode.
void WarmUp(const Target& target, const std::string& body) {
  HttpClient c(target.host, target.port, std::chrono::seconds(600));
  json b = json::parse(body);
  b["cache"] = "none";
  double ms;
  json out;
  std::string err;
  if (!Post(c, b.dump(), &ms, &out, &err))
    throw Error(ErrorKind::kIo, "bench-serve: warm-up request failed: " + err);
}

}  // namespace

BenchServeReport RunBenchServe(BenchServeOptions o, std::unique_ptr<engine::LoadedModel> lm) {
  BenchServeReport report;
  const std::vector<std::string> bodies = BuildBodies(o, *lm, report);
  for (const std::string& name : o.modes) {
    report.modes.push_back({});
    report.modes.back().name = name;
  }
  LocalServer local;
  Target target;
  if (o.url.empty()) {
    const std::string path = lm->path();
    lm.reset();  // the server loads its own copy
    target = local.Start(o, path);
  } else {
    target = ParseUrl(o.url);
  }
  std::fprintf(
      stderr,
      "bench-serve: %s:%d, %zu modes x %d requests, %d clients, %d rounds, %zu prefixes x %d\n",
      target.host.c_str(), target.port, report.modes.size(), o.requests, o.clients, o.rounds,
      report.groups.size(), o.per_prefix);
  std::mt19937_64 arrival_rng(o.seed);
  const auto wall0 = Clock::now();
  WarmUp(target, bodies[0]);
  for (int r = 0; r < o.rounds; ++r) {
    const int count = o.requests / o.rounds + (r < o.requests % o.rounds ? 1 : 0);
    if (count == 0) continue;
    for (ServeModeStats& m : report.modes) {
      RunTurn(o, target, bodies, arrival_rng, m, count, o.duration / o.rounds);
      std::fprintf(stderr, "  round %d %-14s %d requests, %.1fs so far\n", r + 1, m.name.c_str(),
                   m.requests, m.seconds);
    }
  }
  report.wall_seconds = std::chrono::duration<double>(Clock::now() - wall0).count();
  report.final_metrics = Scrape(target);
  local.Stop();
  report.host = target.host;
  report.port = target.port;
  report.options = std::move(o);
  return report;
}

}  // namespace bicache::harness
