#include "harness/forward_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include <omp.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/forward.h"
#include "util/error.h"
#include "util/field_error.h"
#include "util/proc_stats.h"

namespace bicache::harness {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// MeasureReadBandwidth's sums are stored here, so the reads cannot be dropped.
volatile uint64_t g_read_sink = 0;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// Times every projection of one layer (plus the output head once) at n rows, scaled to the model's
// depth: the forward's matmul time if nothing else ran. Median of `repeats`. A mixture-of-experts
// layer's experts run as if routing were balanced: each of the E experts takes its share of the
// n * n_expert_used rows (the router's float32 dot products are not timed: they land in "other").
double IsolatedMatmulMs(const model::Model& m, int n, int logit_rows, int repeats) {
  const auto& c = m.config();
  const auto& w = m.layers()[0];
  // x: [n, widest input]; y: [n, widest output] (the vocabulary for the head).
  const size_t widest_in =
      std::max<size_t>({static_cast<size_t>(c.d_model), static_cast<size_t>(c.d_ff),
                        static_cast<size_t>(c.q_dim())});
  const size_t widest_out = std::max<size_t>(
      {widest_in, static_cast<size_t>(c.q_dim() + 2 * c.kv_dim()), static_cast<size_t>(c.n_vocab)});
  std::vector<float> x(static_cast<size_t>(n) * widest_in, 0.01f),
      y(static_cast<size_t>(n) * widest_out);
  std::vector<const kernels::Linear*> layer;
  for (const kernels::Linear* l :
       {&w.wq, &w.wk, &w.wv, &w.wqkv, &w.wo, &w.w_gate, &w.w_up, &w.w_down}) {
    if (l->in() > 0) layer.push_back(l);
  }
  const int E = c.n_expert, slots = n * c.n_expert_used;
  auto once = [&] {
    const auto t0 = Clock::now();
    for (const kernels::Linear* l : layer) l->Forward(x.data(), n, y.data());
    for (int e = 0; e < E; ++e) {
      const int rows = slots / E + (e < slots % E ? 1 : 0);
      if (rows == 0) continue;
      w.exp_gate[e].Forward(x.data(), rows, y.data());
      w.exp_up[e].Forward(x.data(), rows, y.data());
      w.exp_down[e].Forward(x.data(), rows, y.data());
    }
    const double layer_s = Seconds(t0);
    const auto t1 = Clock::now();
    if (logit_rows > 0) m.output().Forward(x.data(), logit_rows, y.data());
    return layer_s * c.n_layer + Seconds(t1);
  };
  once();  // primitive creation for these shapes
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(once());
  return Median(t) * 1e3;
}

// Times kernels::Attention alone on n tokens with the model's head layout, times n_layer.
double IsolatedAttentionMs(const model::Model& m, int n, int repeats) {
  const auto& c = m.config();
  std::vector<float> q(static_cast<size_t>(n) * c.q_dim()), kv(static_cast<size_t>(n) * c.kv_dim());
  std::vector<float> out(q.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 17) * 0.05f - 0.4f;
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<float>(i % 13) * 0.05f - 0.3f;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  auto once = [&] {
    const auto t0 = Clock::now();
    kernels::Attention(q.data(), n, c.q_dim(), kv.data(), kv.data(), n, c.kv_dim(), c.n_head,
                       c.n_kv_head, c.head_dim, scale, out.data(), c.q_dim());
    return Seconds(t0) * c.n_layer;
  };
  once();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) t.push_back(once());
  return Median(t) * 1e3;
}

}  // namespace

double MeasureReadBandwidth(int passes) {
  constexpr size_t kWords = (256u << 20) / sizeof(uint64_t);
  std::vector<uint64_t> buf(kWords);
  const long n = static_cast<long>(kWords);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) buf[static_cast<size_t>(i)] = static_cast<uint64_t>(i);  // paged in
  double best = 0;
  for (int p = 0; p < std::max(1, passes); ++p) {
    uint64_t sum = 0;
    const auto t0 = Clock::now();
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (long i = 0; i < n; ++i) sum += buf[static_cast<size_t>(i)];
    const double s = Seconds(t0);
    g_read_sink = sum;
    best = std::max(best, static_cast<double>(kWords * sizeof(uint64_t)) / s);
  }
  return best;
}

uint64_t ForwardWeightBytes(const model::Model& m) {
  const format::GgufFile& f = m.file();
  const bool tied = f.FindTensor("output.weight") == nullptr;
  uint64_t bytes = 0;
  for (const auto& t : f.tensors()) {
    if (t.ne.size() < 2 || t.ne[1] <= 1) continue;
    if (t.name == "token_embd.weight" && !tied) continue;
    bytes += t.n_bytes;
  }
  return bytes;
}

ForwardBenchRow MeasureForward(const model::Model& m, int n, int logit_rows_flag, int repeats,
                               int gemm_iters, bool breakdown) {
  const auto& c = m.config();
  if (n > c.context_length) {
    throw FieldError(ErrorKind::kInvalidArgument, "{tokens}: " + std::to_string(n) +
                                                      " exceeds the model's context length " +
                                                      std::to_string(c.context_length));
  }
  ForwardBenchRow r;
  r.tokens = n;
  r.logit_rows = logit_rows_flag <= 0 ? n : std::min(logit_rows_flag, n);
  std::vector<int32_t> toks(n);
  for (int i = 0; i < n; ++i)
    toks[i] = static_cast<int32_t>((i * 7919u + 13u) % static_cast<unsigned>(c.n_vocab));
  std::vector<float> logits(static_cast<size_t>(r.logit_rows) * c.n_vocab);
  model::SeqPlan plan;
  plan.tokens = toks;
  plan.logits_begin = n - r.logit_rows;
  plan.logits_end = n;
  plan.logits = logits.data();

  model::Forward(m, {&plan, 1});  // warm-up: oneDNN primitives for these shapes, page faults
  std::vector<double> secs;
  model::ForwardStats st;
  for (int i = 0; i < repeats; ++i) {
    st = {};
    const auto t0 = Clock::now();
    model::Forward(m, {&plan, 1}, &st);
    secs.push_back(Seconds(t0));
  }
  r.peak_rss =
      PeakRssBytes().value_or(0);  // load + forwards so far, before the yardstick's own buffers
  const double med = Median(secs);
  r.ms_median = med * 1e3;
  r.ms_best = *std::min_element(secs.begin(), secs.end()) * 1e3;
  r.matmul_gflop = st.matmul_flops * 1e-9;
  r.attention_gflop = st.attention_flops * 1e-9;
  r.fwd_gflops = (st.matmul_flops + st.attention_flops) / med * 1e-9;
  r.fwd_gflops_best = (st.matmul_flops + st.attention_flops) / (r.ms_best * 1e-3) * 1e-9;
  // The yardstick runs as often as the forward so both get a median over comparable spans.
  std::vector<double> gemm;
  for (int i = 0; i < repeats; ++i)
    gemm.push_back(kernels::MeasureGemmGflops(n, c.d_ff, c.d_model, gemm_iters));
  r.gemm_gflops = Median(gemm);
  r.gemm_gflops_best = *std::max_element(gemm.begin(), gemm.end());
  if (breakdown) {
    r.ms_matmul = IsolatedMatmulMs(m, n, r.logit_rows, repeats);
    r.ms_attention = IsolatedAttentionMs(m, n, repeats);
    r.ms_other = std::max(0.0, r.ms_median - r.ms_matmul - r.ms_attention);
  }
  return r;
}

}  // namespace bicache::harness
