// `bicache bench-serve`: load test of the HTTP server -- N concurrent clients sending chat
// completions whose system messages (the suite's prefixes) are shared, per cache mode.
//
// The server runs in this process on a free loopback port (or `url` names one already running).
// Every mode is measured on the same server and the same request stream: the modes take turns in
// `rounds` rounds (round 1: none, bicache, ..., round 2: none, bicache, ...), each turn sending its
// share of `requests` with `clients` threads, so a slow stretch of a noisy machine hits every mode.
// A turn ends when its requests are done or its share of `duration` has passed (then clients send
// nothing new; requests in flight finish).
//
// Arrival pattern: closed loop by default (each client sends its next request when the previous
// one has answered: the server always has `clients` requests). `rate` R > 0 makes it open loop:
// request i of a turn is due at t_i, with exponential gaps of mean 1/R seconds (Poisson arrivals,
// seeded by `seed`), and is sent by the first free client at t_i or, when all clients are busy,
// as soon as one frees (`clients` is then the cap on requests in flight). Latency counts from t_i,
// so time a request waited for a free client is included, as a user arriving then would see it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "harness/bench_workload.h"

namespace bicache::harness {

struct BenchServeOptions {
  std::string model, suite, url;   // url empty: an in-process server
  std::vector<std::string> modes;  // cache mode names (CacheMode::ToString), distinct
  int clients = 8, requests = 32, rounds = 2, prefixes = 4, per_prefix = 4, threads = 0;
  int max_tokens = 32, steps = 0, block_length = 0;  // steps, block_length: resolved (> 0)
  int max_running = 0, refresh = 0;
  double duration = 120, cache_budget_mb = 0, rate = 0;
  uint64_t seed = 0;
};

// One mode's accumulated results over its turns.
struct ServeModeStats {
  std::string name;
  int requests = 0, errors = 0, hits = 0;
  double seconds = 0, canvas_tokens = 0, answer_tokens = 0;
  double prefix_hit_tokens = 0, prefix_query_tokens = 0;
  std::vector<double> latencies_ms;
  std::vector<double> send_delays_ms;      // open loop: how late each request left (no free client)
  std::vector<std::string> error_samples;  // first few error messages
  size_t next = 0;                         // next workload request (cycles)
};

struct BenchServeReport {
  BenchServeOptions options;
  std::vector<WorkloadGroup> groups;
  double mean_prompt = 0, mean_prefix = 0;  // tokens per request
  std::string host;                         // the server measured
  int port = 0;
  std::vector<ServeModeStats> modes;
  double wall_seconds = 0;
  std::string final_metrics;  // the server's /metrics after the run
};

// Builds the request stream from the suite (with `model`'s chat template), starts the server
// (which loads its own copy; `model` is released first) unless options.url is set, and runs the
// rounds. Progress goes to stderr.
BenchServeReport RunBenchServe(BenchServeOptions options,
                               std::unique_ptr<engine::LoadedModel> model);

}  // namespace bicache::harness
