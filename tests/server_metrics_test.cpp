// GET /metrics as a Prometheus scraper reads it: every sample has its HELP and TYPE lines, the
// vLLM names routers look for are there, the model label is escaped, and the counters follow what
// the scheduler did.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "server/metrics.h"
#include "test_util.h"

namespace bicache::server {
namespace {

using bicache::testing::DataPath;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The value of the sample line that starts with `series` ("name{labels}"), as the text after it;
// "" if there is none.
std::string Sample(const std::string& text, const std::string& series) {
  for (const std::string& line : Lines(text)) {
    if (line.starts_with(series + " ")) return line.substr(series.size() + 1);
  }
  return "";
}

std::string Series(const std::string& name, const std::string& model = "tiny") {
  return name + "{model_name=\"" + model + "\"}";
}

TEST(ServerMetrics, EveryMetricHasHelpTypeAndOneSample) {
  engine::SchedulerStats s;
  s.depth_counts.assign(3, 0);
  const std::string text = RenderMetrics(s, "tiny");
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');  // the exposition format ends every line, the last one too

  const std::map<std::string, std::string> kTypes = {
      {"vllm:num_requests_running", "gauge"},
      {"vllm:num_requests_waiting", "gauge"},
      {"vllm:gpu_cache_usage_perc", "gauge"},
      {"vllm:gpu_prefix_cache_hits_total", "counter"},
      {"vllm:gpu_prefix_cache_queries_total", "counter"},
      {"bicache_cache_bytes", "gauge"},
      {"bicache_cache_pinned_bytes", "gauge"},
      {"bicache_cache_budget_bytes", "gauge"},
      {"bicache_cache_entries", "gauge"},
      {"bicache_cache_evictions_total", "counter"},
      {"bicache_cache_lookups_total", "counter"},
      {"bicache_cache_lookup_hits_total", "counter"},
      {"bicache_prefix_builds_total", "counter"},
      {"bicache_prefix_build_chunks_total", "counter"},
      {"bicache_requests_finished_total", "counter"},
      {"bicache_requests_cancelled_total", "counter"},
      {"bicache_requests_failed_total", "counter"},
      {"bicache_requests_rejected_total", "counter"},
      {"bicache_batch_iterations_total", "counter"},
      {"bicache_connections_open", "gauge"},
      {"bicache_connections_refused_total", "counter"},
      {"bicache_connections_timed_out_total", "counter"},
      {"bicache_depth", "histogram"},
  };
  // Each family: "# HELP name <text>" then "# TYPE name <type>" before its first sample, once.
  std::map<std::string, std::string> typed;
  std::map<std::string, int> helps;
  std::string last_help;
  for (const std::string& line : Lines(text)) {
    SCOPED_TRACE(line);
    if (line.starts_with("# HELP ")) {
      std::istringstream in(line.substr(7));
      in >> last_help;
      ++helps[last_help];
      std::string rest;
      std::getline(in, rest);
      EXPECT_GT(rest.size(), 1u) << "HELP without text";
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::istringstream in(line.substr(7));
      std::string name, type;
      in >> name >> type;
      EXPECT_EQ(name, last_help) << "TYPE not right after its HELP";
      EXPECT_TRUE(typed.emplace(name, type).second) << "second TYPE for " << name;
      continue;
    }
    const std::string name = line.substr(0, line.find('{'));
    const std::string family = name.starts_with("bicache_depth_") ? "bicache_depth" : name;
    EXPECT_TRUE(typed.count(family)) << "sample before its TYPE line";
    EXPECT_NE(line.find("{model_name=\"tiny\""), std::string::npos);
  }
  EXPECT_EQ(typed, kTypes);
  for (const auto& [name, type] : kTypes) EXPECT_EQ(helps[name], 1) << name;
}

TEST(ServerMetrics, ValuesFollowTheStats) {
  engine::SchedulerStats s;
  s.running = 3;
  s.waiting = 7;
  s.finished = 11;
  s.cancelled = 2;
  s.failed = 1;
  s.rejected = 4;
  s.iterations = 123;
  s.prefix_chunks = 9;
  s.prefix_query_tokens = 1000;
  s.prefix_hit_tokens = 640;
  s.cache.prefix_builds = 5;
  s.cache.total.bytes_used = 250;
  s.cache.total.bytes_pinned = 100;
  s.cache.total.budget = 1000;
  s.cache.total.entries = 6;
  s.cache.total.evictions = 8;
  s.cache.total.queries = 20;
  s.cache.total.hits = 15;
  const std::string text = RenderMetrics(s, "tiny");
  const std::pair<const char*, const char*> kWant[] = {
      {"vllm:num_requests_running", "3"},
      {"vllm:num_requests_waiting", "7"},
      {"vllm:gpu_cache_usage_perc", "0.25"},  // a fraction, as vLLM reports it
      {"vllm:gpu_prefix_cache_hits_total", "640"},
      {"vllm:gpu_prefix_cache_queries_total", "1000"},
      {"bicache_cache_bytes", "250"},
      {"bicache_cache_pinned_bytes", "100"},
      {"bicache_cache_budget_bytes", "1000"},
      {"bicache_cache_entries", "6"},
      {"bicache_cache_evictions_total", "8"},
      {"bicache_cache_lookups_total", "20"},
      {"bicache_cache_lookup_hits_total", "15"},
      {"bicache_prefix_builds_total", "5"},
      {"bicache_requests_finished_total", "11"},
      {"bicache_requests_cancelled_total", "2"},
      {"bicache_requests_failed_total", "1"},
      {"bicache_requests_rejected_total", "4"},
      {"bicache_batch_iterations_total", "123"},
      {"bicache_prefix_build_chunks_total", "9"},
  };
  for (const auto& [name, value] : kWant) EXPECT_EQ(Sample(text, Series(name)), value) << name;
}

TEST(ServerMetrics, NoBudgetMeansZeroUsage) {
  engine::SchedulerStats s;
  s.cache.total.bytes_used = 10;  // budget 0: no division by zero, no NaN in the scrape
  EXPECT_EQ(Sample(RenderMetrics(s, "tiny"), Series("vllm:gpu_cache_usage_perc")), "0");
}

TEST(ServerMetrics, ConnectionCounters) {
  const std::string text = RenderMetrics({}, "tiny", {7, 2, 3});
  EXPECT_EQ(Sample(text, Series("bicache_connections_open")), "7");
  EXPECT_EQ(Sample(text, Series("bicache_connections_refused_total")), "2");
  EXPECT_EQ(Sample(text, Series("bicache_connections_timed_out_total")), "3");
}

TEST(ServerMetrics, DepthHistogramIsCumulative) {
  engine::SchedulerStats s;
  s.depth_counts = {2, 0, 3};  // 2 requests reused no layer, 3 reused both
  const std::string text = RenderMetrics(s, "tiny");
  EXPECT_NE(text.find("# HELP bicache_depth Layers of prefix K/V reused per finished request.\n"
                      "# TYPE bicache_depth histogram\n"
                      "bicache_depth_bucket{model_name=\"tiny\",le=\"0\"} 2\n"
                      "bicache_depth_bucket{model_name=\"tiny\",le=\"1\"} 2\n"
                      "bicache_depth_bucket{model_name=\"tiny\",le=\"2\"} 5\n"
                      "bicache_depth_bucket{model_name=\"tiny\",le=\"+Inf\"} 5\n"
                      "bicache_depth_sum{model_name=\"tiny\"} 6\n"
                      "bicache_depth_count{model_name=\"tiny\"} 5\n"),
            std::string::npos)
      << text;
}

TEST(ServerMetrics, ModelLabelIsEscaped) {
  // Backslash, quote and newline are the three characters a label value escapes.
  const std::string text = RenderMetrics({}, "dir\\my \"best\"\nmodel");
  const std::string label = "{model_name=\"dir\\\\my \\\"best\\\"\\nmodel\"}";
  EXPECT_NE(text.find("vllm:num_requests_running" + label + " 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("bicache_depth_count" + label + " 0\n"), std::string::npos) << text;
  // No raw newline inside a sample line: every line is a comment or starts with a metric name.
  for (const std::string& line : Lines(text)) {
    EXPECT_TRUE(line.starts_with("# ") || line.starts_with("vllm:") || line.starts_with("bicache_"))
        << line;
  }
}

// A scrape after real work: two chat requests sharing a system prompt through a scheduler.
TEST(ServerMetrics, CountersAfterRequestsRun) {
  using namespace std::chrono_literals;
  auto lm = engine::LoadedModel::Load(DataPath("golden/llada-tiny.gguf"));
  engine::Engine engine(lm->model(), {});
  engine::Scheduler sched(engine, {});
  std::vector<int> prompt_sizes;
  std::vector<int> prefix_lens;
  for (int i = 0; i < 2; ++i) {
    const engine::Prompt p = lm->ChatPrompt({{"system", "A shared document that both read."},
                                             {"user", "question " + std::to_string(i)}});
    engine::RequestOptions o;
    o.prompt = p.tokens;
    o.prefix_len = p.prefix_len;
    o.sampler.gen_length = 4;
    o.sampler.steps = 4;
    o.sampler.block_length = 4;
    o.sampler.mask_id = lm->model().config().mask_token_id;
    o.sampler.stop_ids = lm->stop_ids();
    o.cache = engine::ParseCacheMode("fixed:1");
    prompt_sizes.push_back(static_cast<int>(p.tokens.size()));
    prefix_lens.push_back(p.prefix_len);
    // One at a time, so the second finds the first's prefix in the cache.
    std::mutex m;
    std::condition_variable cv;
    bool done = false, ok = false;
    engine::RequestCallbacks cb;
    cb.on_done = [&](const engine::RequestResult&) {
      std::lock_guard<std::mutex> l(m);
      done = ok = true;
      cv.notify_all();
    };
    cb.on_error = [&](const Error& e) {
      std::lock_guard<std::mutex> l(m);
      ADD_FAILURE() << e.what();
      done = true;
      cv.notify_all();
    };
    sched.Submit(std::move(o), std::move(cb));
    std::unique_lock<std::mutex> l(m);
    ASSERT_TRUE(cv.wait_for(l, 120s, [&] { return done; })) << "request " << i << " never ended";
    ASSERT_TRUE(ok);
  }
  ASSERT_EQ(prefix_lens[0], prefix_lens[1]);
  ASSERT_GT(prefix_lens[0], 0);

  const std::string text = RenderMetrics(sched.stats(), "llada-tiny");
  auto value = [&](const std::string& name) { return Sample(text, Series(name, "llada-tiny")); };
  EXPECT_EQ(value("bicache_requests_finished_total"), "2");
  EXPECT_EQ(value("bicache_requests_cancelled_total"), "0");
  EXPECT_EQ(value("bicache_requests_failed_total"), "0");
  EXPECT_EQ(value("vllm:num_requests_running"), "0");
  EXPECT_EQ(value("vllm:num_requests_waiting"), "0");
  EXPECT_EQ(value("vllm:gpu_prefix_cache_queries_total"),
            std::to_string(prompt_sizes[0] + prompt_sizes[1]));
  // The first request built the shared prefix; the second was served it whole.
  EXPECT_EQ(value("bicache_prefix_builds_total"), "1");
  EXPECT_EQ(value("bicache_cache_entries"), "1");
  EXPECT_EQ(value("vllm:gpu_prefix_cache_hits_total"), std::to_string(prefix_lens[1]));
  EXPECT_NE(value("bicache_cache_bytes"), "0");
  EXPECT_NE(value("bicache_batch_iterations_total"), "0");
  EXPECT_EQ(value("bicache_depth_count"), "2");
}

}  // namespace
}  // namespace bicache::server
