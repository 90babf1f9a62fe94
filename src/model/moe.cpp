// The mixture-of-experts feed-forward (model/moe.h): route, group rows by expert, one GEMM per
// projection per active expert, weighted scatter-add into the residual stream.
#include "model/moe.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
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

// The best of `n` scores not yet taken (taken[i] true), ties to the lower index; -1 if none.
int BestUntaken(const float* score, const std::vector<char>& taken, int n) {
  int best = -1;
  for (int i = 0; i < n; ++i) {
    if (!taken[i] && (best < 0 || score[i] > score[best])) best = i;
  }
  return best;
}

// x[rows, d] += W_down(SwiGLU(W_gate h, W_up h)) of llada2's shared expert(s).
void SharedExperts(const ModelConfig& c, const LayerWeights& w, const float* h, int rows, float* x,
                   MoeScratch& sc, ForwardStats* st) {
  const int d = c.d_model, sh = c.d_ff_shexp;
  float* gate = GrowTo(sc.gate, static_cast<size_t>(rows) * sh);  // [rows, sh]
  float* up = GrowTo(sc.up, static_cast<size_t>(rows) * sh);      // [rows, sh]
  float* y = GrowTo(sc.ye, static_cast<size_t>(rows) * d);        // [rows, d]
  w.shexp_gate.Forward(h, rows, gate);
  w.shexp_up.Forward(h, rows, up);
  kernels::SwiGlu(gate, up, gate, static_cast<size_t>(rows) * sh);
  w.shexp_down.Forward(gate, rows, y);
  kernels::AddInPlace(x, y, static_cast<size_t>(rows) * d);
  st->matmul_flops += 2.0 * rows * 3.0 * d * sh;
}

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

void RouteSigmoidGroupTopK(const float* logits, int rows, const GroupRouting& g, int* ids,
                           float* weights) {
  const int E = g.n_expert, G = g.n_group, per = E / G, K = g.k;
  std::vector<float> s(E), choice(E), group(G);
  std::vector<char> taken(E), group_off(G);
  for (int r = 0; r < rows; ++r) {
    const float* lg = logits + static_cast<size_t>(r) * E;
    for (int e = 0; e < E; ++e) {
      s[e] = 1.0f / (1.0f + std::exp(-lg[e]));
      choice[e] = s[e] + (g.bias ? g.bias[e] : 0.0f);
    }
    std::fill(taken.begin(), taken.end(), 0);
    if (g.n_group_used < G) {  // keep the best groups: mark the others' experts as taken
      for (int gi = 0; gi < G; ++gi) {
        const float* cg = &choice[static_cast<size_t>(gi) * per];
        const int a = static_cast<int>(std::max_element(cg, cg + per) - cg);
        float second = -INFINITY;
        for (int i = 0; i < per; ++i) {
          if (i != a) second = std::max(second, cg[i]);
        }
        group[gi] = cg[a] + second;
      }
      std::fill(group_off.begin(), group_off.end(), 1);
      for (int j = 0; j < g.n_group_used; ++j) {
        int best = -1;
        for (int gi = 0; gi < G; ++gi) {
          if (group_off[gi] && (best < 0 || group[gi] > group[best])) best = gi;
        }
        group_off[best] = 0;
      }
      for (int e = 0; e < E; ++e) taken[e] = group_off[e / per];
    }
    int* id = ids + static_cast<size_t>(r) * K;
    float* wt = weights + static_cast<size_t>(r) * K;
    float sum = 0;
    for (int j = 0; j < K; ++j) {  // K passes: k and E are small (8 of 256 for LLaDA2.0-mini)
      id[j] = BestUntaken(choice.data(), taken, E);
      taken[id[j]] = 1;
      wt[j] = s[id[j]];
      sum += wt[j];
    }
    const float norm = g.renormalise && K > 1 ? 1.0f / (sum + 1e-20f) : 1.0f;
    for (int j = 0; j < K; ++j) wt[j] *= norm * g.scale;
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
  if (c.traits().router == RouterKind::kSigmoidGroupTopK) {
    const GroupRouting g{.n_expert = E,
                         .k = K,
                         .n_group = c.n_expert_group,
                         .n_group_used = c.n_expert_group_used,
                         .renormalise = c.expert_weights_norm,
                         .scale = c.expert_weights_scale,
                         .bias = w.router_bias.empty() ? nullptr : w.router_bias.data()};
    RouteSigmoidGroupTopK(logits, rows, g, ids, wts);
  } else {
    RouteTopK(logits, rows, E, K, c.expert_weights_norm, ids, wts);
  }
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
  if (c.traits().shared_experts) SharedExperts(c, w, h, rows, x, sc, st);
}

}  // namespace bicache::model
