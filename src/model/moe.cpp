// The mixture-of-experts feed-forward (model/moe.h): route, group rows by expert, one GEMM per
// projection per active expert, weighted scatter-add into the residual stream.
#include "model/moe.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/ops.h"
#include "util/grow.h"

namespace bicache::model {
namespace {

// Per-thread buffers, grown to the largest forward seen (see forward.cpp's Scratch).
struct MoeScratch {
  std::vector<float> logits, weights, xe, gate, up, ye;
  std::vector<int> ids, slot_of, begin, next;
};

// logits[r, e] = router[e, :] . h[r, :] in float32.   h: [rows, d], router: [E, d]
void RouterLogits(const float* router, const float* h, int rows, int d, int E, float* logits) {
#pragma omp parallel for schedule(static) if (static_cast <int64_t>(rows) * E * d > (1 << 16))
  for (int r = 0; r < rows; ++r) {
    const float* x = h + static_cast<size_t>(r) * d;
    for (int e = 0; e < E; ++e) {
      const float* wr = router + static_cast<size_t>(e) * d;
      float acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int i = 0; i < d; ++i) acc += wr[i] * x[i];
      logits[static_cast<size_t>(r) * E + e] = acc;
    }
  }
}

// Counting sort of the rows' choices by expert: expert e's slots are slot_of[begin[e] ..
// begin[e+1]), each slot r*k + j naming row r's j-th choice.
// `next` is scratch of E ints.
void GroupByExpert(const int* ids, int slots, int E, int* begin, int* next, int* slot_of) {
  std::fill(begin, begin + E + 1, 0);
  for (int s = 0; s < slots; ++s) ++begin[ids[s] + 1];
  for (int e = 0; e < E; ++e) begin[e + 1] += begin[e];
  std::copy(begin, begin + E, next);
  for (int s = 0; s < slots; ++s) slot_of[next[ids[s]]++] = s;
}

}  // namespace

void RouteTopK(float* logits, int rows, int n_expert, int k, bool renormalise, int* ids,
               float* weights) {
  for (int r = 0; r < rows; ++r) {
    float* p = logits + static_cast<size_t>(r) * n_expert;
    kernels::Softmax(p, n_expert);
    int* id = ids + static_cast<size_t>(r) * k;
    float* wt = weights + static_cast<size_t>(r) * k;
    float sum = 0;
    for (int j = 0; j < k; ++j) {  // k passes: k and n_expert are small (8 of 64 for LLaDA-MoE)
      int best = -1;
      for (int e = 0; e < n_expert; ++e) {
        if (std::find(id, id + j, e) != id + j) continue;
        if (best < 0 || p[e] > p[best]) best = e;
      }
      id[j] = best;
      wt[j] = p[best];
      sum += p[best];
    }
    if (renormalise && sum > 0) {
      for (int j = 0; j < k; ++j) wt[j] /= sum;
    }
  }
}

void MoeFeedForward(const ModelConfig& c, const LayerWeights& w, const float* h, int rows, float* x,
                    ForwardStats* st) {
  const int d = c.d_model, ff = c.d_ff_exp, E = c.n_expert, K = c.n_expert_used;
  thread_local MoeScratch sc;
  const size_t slots = static_cast<size_t>(rows) * K;
  float* logits = GrowTo(sc.logits, static_cast<size_t>(rows) * E);  // [rows, E]
  float* wts = GrowTo(sc.weights, slots);                            // [rows, K]
  int* ids = GrowTo(sc.ids, slots);                                  // [rows, K]
  int* slot_of = GrowTo(sc.slot_of, slots);                          // slots grouped by expert
  int* begin = GrowTo(sc.begin, static_cast<size_t>(E) + 1);
  RouterLogits(w.router.data(), h, rows, d, E, logits);
  RouteTopK(logits, rows, E, K, c.expert_weights_norm, ids, wts);
  GroupByExpert(ids, static_cast<int>(slots), E, begin, GrowTo(sc.next, static_cast<size_t>(E)),
                slot_of);
  st->matmul_flops += 2.0 * rows * E * d;

  for (int e = 0; e < E; ++e) {
    const int n = begin[e + 1] - begin[e];
    if (n == 0) continue;  // no row chose it: its weights are never read
    const int* my = slot_of + begin[e];
    float* xe = GrowTo(sc.xe, static_cast<size_t>(n) * d);       // [n, d]  its rows of h
    float* gate = GrowTo(sc.gate, static_cast<size_t>(n) * ff);  // [n, ff]
    float* up = GrowTo(sc.up, static_cast<size_t>(n) * ff);      // [n, ff]
    float* ye = GrowTo(sc.ye, static_cast<size_t>(n) * d);       // [n, d]
    for (int i = 0; i < n; ++i)
      std::memcpy(xe + static_cast<size_t>(i) * d, h + static_cast<size_t>(my[i] / K) * d,
                  sizeof(float) * d);
    w.exp_gate[e].Forward(xe, n, gate);
    w.exp_up[e].Forward(xe, n, up);
    kernels::SwiGlu(gate, up, gate, static_cast<size_t>(n) * ff);
    w.exp_down[e].Forward(gate, n, ye);
    st->matmul_flops += 2.0 * n * 3.0 * d * ff;
    // A row takes an expert at most once, so the rows written here are distinct.
    for (int i = 0; i < n; ++i) {
      float* xr = x + static_cast<size_t>(my[i] / K) * d;
      const float* yr = ye + static_cast<size_t>(i) * d;
      const float g = wts[my[i]];
      for (int j = 0; j < d; ++j) xr[j] += g * yr[j];
    }
  }
}

}  // namespace bicache::model
