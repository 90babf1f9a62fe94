#include "server/metrics.h"

#include <sstream>

namespace bicache::server {
namespace {

// Label values escape backslash, quote and newline (the exposition format's rule).
std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Writer {
 public:
  explicit Writer(std::string labels) : labels_(std::move(labels)) {}
  template <typename T>
  void Metric(const char* name, const char* type, const char* help, T value) {
    out_ << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
         << name << '{' << labels_ << "} " << value << '\n';
  }
  std::ostringstream& out() { return out_; }
  const std::string& labels() const { return labels_; }

 private:
  std::string labels_;
  std::ostringstream out_;
};

}  // namespace

std::string RenderMetrics(const engine::SchedulerStats& s, const std::string& model_id,
                          const ConnectionStats& connections) {
  Writer w("model_name=\"" + Escape(model_id) + "\"");
  const auto& c = s.cache.total;
  // vLLM names. "gpu" is historical: here it is the prefix cache in host memory. Usage is a
  // fraction in [0, 1], as vLLM reports it despite the name.
  w.Metric("vllm:num_requests_running", "gauge", "Requests in the running batch.", s.running);
  w.Metric("vllm:num_requests_waiting", "gauge", "Requests waiting for admission.", s.waiting);
  w.Metric("vllm:gpu_cache_usage_perc", "gauge", "Prefix cache bytes used / budget (0..1).",
           c.budget ? static_cast<double>(c.bytes_used) / static_cast<double>(c.budget) : 0.0);
  w.Metric("vllm:gpu_prefix_cache_hits_total", "counter",
           "Prompt tokens served from the prefix cache.", s.prefix_hit_tokens);
  w.Metric("vllm:gpu_prefix_cache_queries_total", "counter", "Prompt tokens of finished requests.",
           s.prefix_query_tokens);
  // bicache's own.
  w.Metric("bicache_cache_bytes", "gauge", "Prefix cache bytes used.", c.bytes_used);
  w.Metric("bicache_cache_pinned_bytes", "gauge", "Prefix cache bytes pinned by running requests.",
           c.bytes_pinned);
  w.Metric("bicache_cache_budget_bytes", "gauge", "Prefix cache byte budget.", c.budget);
  w.Metric("bicache_cache_entries", "gauge", "Cached prefixes.", c.entries);
  w.Metric("bicache_cache_evictions_total", "counter", "Prefix entries evicted.", c.evictions);
  w.Metric("bicache_cache_lookups_total", "counter", "Prefix store lookups.", c.queries);
  w.Metric("bicache_cache_lookup_hits_total", "counter", "Prefix store lookups that hit.", c.hits);
  w.Metric("bicache_prefix_builds_total", "counter", "Prefix entries computed.",
           s.cache.prefix_builds);
  w.Metric("bicache_requests_finished_total", "counter", "Requests finished.", s.finished);
  w.Metric("bicache_requests_cancelled_total", "counter",
           "Requests cancelled (client gone or shutdown).", s.cancelled);
  w.Metric("bicache_requests_failed_total", "counter", "Requests that failed in the engine.",
           s.failed);
  w.Metric("bicache_requests_rejected_total", "counter",
           "Requests refused because the queue was full.", s.rejected);
  w.Metric("bicache_batch_iterations_total", "counter", "Batched forward iterations.",
           s.iterations);
  w.Metric("bicache_prefix_build_chunks_total", "counter",
           "Prefix-build forwards (chunks of layers run between batch iterations).",
           s.prefix_chunks);
  w.Metric("bicache_connections_open", "gauge", "Client connections held (--max-connections).",
           connections.open);
  w.Metric("bicache_connections_refused_total", "counter",
           "Connections answered 503 over --max-connections.", connections.refused);
  w.Metric("bicache_connections_timed_out_total", "counter",
           "Requests answered 408: head or body slower than --header-timeout / --body-timeout.",
           connections.timed_out);
  // Depth histogram: finished requests by the number of layers whose prefix K/V were reused.
  auto& o = w.out();
  o << "# HELP bicache_depth Layers of prefix K/V reused per finished request.\n# TYPE "
       "bicache_depth histogram\n";
  uint64_t cum = 0, sum = 0;
  for (size_t d = 0; d < s.depth_counts.size(); ++d) {
    cum += s.depth_counts[d];
    sum += d * s.depth_counts[d];
    o << "bicache_depth_bucket{" << w.labels() << ",le=\"" << d << "\"} " << cum << '\n';
  }
  o << "bicache_depth_bucket{" << w.labels() << ",le=\"+Inf\"} " << cum << '\n'
    << "bicache_depth_sum{" << w.labels() << "} " << sum << '\n'
    << "bicache_depth_count{" << w.labels() << "} " << cum << '\n';
  return o.str();
}

}  // namespace bicache::server
