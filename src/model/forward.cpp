#include "model/forward.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/ops.h"
#include "model/moe.h"
#include "util/error.h"
#include "util/grow.h"

namespace bicache::model {
namespace {

// Row layout of the stacked activations at one layer: sequence s owns rows
// [row_begin[s], row_begin[s] + (pos_end[s] - pos_begin[s])), holding absolute positions
// pos_begin[s] .. pos_end[s]-1 in order.
struct Layout {
  std::vector<int> row_begin, pos_begin, pos_end;
  int rows = 0;
};

struct SeqView {
  const SeqPlan* plan;
  int n;       // sequence length
  int cb, ce;  // compute range in layers < partial_depth
};

[[noreturn]] void BadPlan(size_t s, const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument,
              "forward plan of sequence " + std::to_string(s) + ": " + what);
}

std::vector<SeqView> Validate(const ModelConfig& c, std::span<const SeqPlan> plans) {
  std::vector<SeqView> seqs;
  for (size_t s = 0; s < plans.size(); ++s) {
    const SeqPlan& p = plans[s];
    const int n = static_cast<int>(p.tokens.size());
    if (n <= 0) BadPlan(s, "no tokens");
    if (n > c.context_length) {
      BadPlan(s, std::to_string(n) + " tokens exceed the model's context length of " +
                     std::to_string(c.context_length));
    }
    for (int32_t t : p.tokens) {
      if (t < 0 || t >= c.n_vocab)
        BadPlan(s, "token id " + std::to_string(t) + " is outside the vocabulary");
    }
    SeqView v{&p, n, p.compute_begin, p.compute_end < 0 ? n : p.compute_end};
    if (p.partial_depth < 0 || p.partial_depth > c.n_layer)
      BadPlan(s, "partial_depth out of range");
    if (v.cb < 0 || v.cb >= v.ce || v.ce > n)
      BadPlan(s, "compute range is empty or outside the sequence");
    const bool partial = p.partial_depth > 0 && (v.cb != 0 || v.ce != n);
    if (!partial) {
      v.cb = 0;
      v.ce = n;
    }
    if (partial) {
      if (!p.kv_in || p.kv_in->n_tok != n) BadPlan(s, "kv_in missing or of a different length");
      for (int l = 0; l < p.partial_depth; ++l) {
        const LayerKv& kv = p.kv_in->layers.at(l);
        if (kv.k.size() != static_cast<size_t>(n) * c.kv_dim() || kv.v.size() != kv.k.size()) {
          BadPlan(s, "kv_in has no K/V for layer " + std::to_string(l));
        }
      }
      if (p.partial_depth < c.n_layer &&
          p.kv_in->hidden.at(p.partial_depth).size() != static_cast<size_t>(n) * c.d_model) {
        BadPlan(s, "kv_in has no hidden state at layer " + std::to_string(p.partial_depth));
      }
    }
    if (p.logits_end > p.logits_begin) {
      if (!p.logits) BadPlan(s, "logits buffer missing");
      if (p.logits_begin < 0 || p.logits_end > n) BadPlan(s, "logits rows outside the sequence");
      const bool all_at_end = p.partial_depth < c.n_layer || !partial;
      if (!all_at_end && (p.logits_begin < v.cb || p.logits_end > v.ce)) {
        BadPlan(s, "logits requested for rows that are not computed");
      }
    }
    if (p.kv_out) {
      if (p.capture_kv_layers < 0 || p.capture_kv_layers > c.n_layer || p.capture_hidden_max < 0 ||
          p.capture_hidden_max > c.n_layer) {
        BadPlan(s, "capture range out of bounds");
      }
      if (p.kv_out->n_tok != n || static_cast<int>(p.kv_out->layers.size()) != c.n_layer ||
          static_cast<int>(p.kv_out->hidden.size()) != c.n_layer + 1) {
        BadPlan(s, "kv_out not Reset() for this sequence");
      }
    }
    seqs.push_back(v);
  }
  return seqs;
}

Layout MakeLayout(const std::vector<SeqView>& seqs, int layer) {
  Layout L;
  for (const SeqView& v : seqs) {
    const bool partial = layer < v.plan->partial_depth;
    L.row_begin.push_back(L.rows);
    L.pos_begin.push_back(partial ? v.cb : 0);
    L.pos_end.push_back(partial ? v.ce : v.n);
    L.rows += L.pos_end.back() - L.pos_begin.back();
  }
  return L;
}

// Runs fn(begin, end) over [0, rows) in OpenMP chunks.
template <typename Fn>
void ParallelRows(int rows, Fn fn) {
  const int threads = std::max(1, std::min(omp_get_max_threads(), rows / 8 + 1));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < threads; ++t) {
    const int b = static_cast<int>(static_cast<int64_t>(rows) * t / threads);
    const int e = static_cast<int>(static_cast<int64_t>(rows) * (t + 1) / threads);
    if (b < e) fn(b, e);
  }
}

void Project(const kernels::Linear& w, const float* x, int rows, float* y, ForwardStats* st) {
  w.Forward(x, rows, y);
  st->matmul_flops += 2.0 * rows * w.in() * w.out();
}

// Per-thread activation buffers, grown to the largest forward the thread has run and never shrunk
// or cleared: allocating (and zero-filling) them on every call cost ~30% of a small forward in
// memset and page faults (glibc hands blocks this large back to the OS on free). Every row a
// forward reads it has written first, so stale contents are never seen.
struct Scratch {
  std::vector<float> x, h, q, k, v, att, gate, up, qkv, nx, sel, logits;
  std::vector<int32_t> pos;
};

void CopyRows(float* dst, const float* src, int rows, int width) {
  std::memcpy(dst, src, sizeof(float) * static_cast<size_t>(rows) * width);
}

// The forward's activation buffers for one call, carved from the thread's Scratch and sized for
// the largest layout (every token of every sequence).
struct Buffers {
  float* x;      // [rows, d] residual stream
  float* h;      // [rows, d] normed input / block output
  float* q;      // [rows, q_dim]
  float* k;      // [rows, kv_dim]
  float* v;      // [rows, kv_dim]
  float* att;    // [rows, q_dim]
  float* gate;   // [rows, d_ff]
  float* up;     // [rows, d_ff]
  int32_t* pos;  // [rows] absolute positions
  Scratch* sc;   // for the buffers sized per layer (qkv, nx) or per head (sel, logits)
};

Buffers GrowBuffers(const ModelConfig& c, size_t max_rows, Scratch* sc) {
  Buffers b;
  b.x = GrowTo(sc->x, max_rows * c.d_model);
  b.h = GrowTo(sc->h, max_rows * c.d_model);
  b.q = GrowTo(sc->q, max_rows * c.q_dim());
  b.k = GrowTo(sc->k, max_rows * c.kv_dim());
  b.v = GrowTo(sc->v, max_rows * c.kv_dim());
  b.att = GrowTo(sc->att, max_rows * c.q_dim());
  b.gate = GrowTo(sc->gate, max_rows * c.d_ff);
  b.up = GrowTo(sc->up, max_rows * c.d_ff);
  b.pos = GrowTo(sc->pos, max_rows);
  b.sc = sc;
  return b;
}

// Embeds the tokens of layer 0's layout into x.
void Embed(const Model& model, const std::vector<SeqView>& seqs, const Layout& lay, float* x) {
  const int d = model.config().d_model;
  ParallelRows(lay.rows, [&](int b, int e) {
    for (size_t s = 0; s < seqs.size(); ++s) {
      for (int p = lay.pos_begin[s]; p < lay.pos_end[s]; ++p) {
        const int r = lay.row_begin[s] + p - lay.pos_begin[s];
        if (r >= b && r < e) model.Embed(seqs[s].plan->tokens[p], &x[static_cast<size_t>(r) * d]);
      }
    }
  });
}

// Moves x from layout `lay` to `next` at layer l: sequences whose partial layers end here grow to
// every token, the rows they did not compute taken from their cached hidden state at l.
void Rejoin(const std::vector<SeqView>& seqs, const Layout& lay, const Layout& next, int l, int d,
            Buffers& buf) {
  float* nx = GrowTo(buf.sc->nx, static_cast<size_t>(next.rows) * d);  // [next rows, d]
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int p = next.pos_begin[s]; p < next.pos_end[s]; ++p) {
      float* dst = &nx[static_cast<size_t>(next.row_begin[s] + p - next.pos_begin[s]) * d];
      if (p >= lay.pos_begin[s] && p < lay.pos_end[s]) {
        CopyRows(dst, &buf.x[static_cast<size_t>(lay.row_begin[s] + p - lay.pos_begin[s]) * d], 1,
                 d);
      } else {
        CopyRows(dst, &seqs[s].plan->kv_in->hidden[l][static_cast<size_t>(p) * d], 1, d);
      }
    }
  }
  std::copy_n(nx, static_cast<size_t>(next.rows) * d, buf.x);
}

// Copies the computed rows of x (layer `slot`'s input, or the last layer's output at n_layer)
// into kv_out->hidden[slot] of every sequence that captures it.
void CaptureHidden(const std::vector<SeqView>& seqs, const Layout& lay, int slot, int d,
                   const float* x) {
  for (size_t s = 0; s < seqs.size(); ++s) {
    const SeqPlan& p = *seqs[s].plan;
    if (!p.kv_out || slot < 1 || slot > p.capture_hidden_max) continue;
    auto& dst = p.kv_out->hidden[slot];
    dst.resize(static_cast<size_t>(seqs[s].n) * d);
    CopyRows(&dst[static_cast<size_t>(lay.pos_begin[s]) * d],
             &x[static_cast<size_t>(lay.row_begin[s]) * d], lay.pos_end[s] - lay.pos_begin[s], d);
  }
}

// h = RMSNorm(x); q, k, v = projections of h (+ bias), RoPE applied to q and k.
void ProjectQkv(const ModelConfig& c, const LayerWeights& w, int R, Buffers& buf,
                ForwardStats* st) {
  const int d = c.d_model, qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim;
  float *x = buf.x, *h = buf.h, *q = buf.q, *k = buf.k, *v = buf.v;
  ParallelRows(R, [&](int b, int e) {
    kernels::RmsNorm(&x[(size_t)b * d], w.attn_norm.data(), &h[(size_t)b * d], e - b, d, c.rms_eps);
  });
  if (w.fused_qkv) {
    float* qkv = GrowTo(buf.sc->qkv,
                        static_cast<size_t>(R) * (qd + 2 * kvd));  // [rows, q+2kv] fused Dream form
    Project(w.wqkv, h, R, qkv, st);
    const int W = qd + 2 * kvd;
    ParallelRows(R, [&](int b, int e) {
      for (int r = b; r < e; ++r) {
        CopyRows(&q[(size_t)r * qd], &qkv[(size_t)r * W], 1, qd);
        CopyRows(&k[(size_t)r * kvd], &qkv[(size_t)r * W + qd], 1, kvd);
        CopyRows(&v[(size_t)r * kvd], &qkv[(size_t)r * W + qd + kvd], 1, kvd);
      }
    });
  } else {
    Project(w.wq, h, R, q, st);
    Project(w.wk, h, R, k, st);
    Project(w.wv, h, R, v, st);
  }
  if (!w.bq.empty()) {
    ParallelRows(R, [&](int b, int e) {
      kernels::AddBiasRows(&q[(size_t)b * qd], w.bq.data(), e - b, qd);
      kernels::AddBiasRows(&k[(size_t)b * kvd], w.bk.data(), e - b, kvd);
      kernels::AddBiasRows(&v[(size_t)b * kvd], w.bv.data(), e - b, kvd);
    });
  }
  if (!w.q_norm.empty()) {  // llada-moe: RMSNorm over each head's head_dim values
    ParallelRows(R, [&](int b, int e) {
      kernels::RmsNorm(&q[(size_t)b * qd], w.q_norm.data(), &q[(size_t)b * qd],
                       (size_t)(e - b) * c.n_head, hd, c.rms_eps);
      kernels::RmsNorm(&k[(size_t)b * kvd], w.k_norm.data(), &k[(size_t)b * kvd],
                       (size_t)(e - b) * c.n_kv_head, hd, c.rms_eps);
    });
  }
  ParallelRows(R, [&](int b, int e) {
    if (c.rope_dim == hd) {
      kernels::Rope(&q[(size_t)b * qd], e - b, qd, c.n_head, hd, &buf.pos[b], c.rope_base,
                    c.rope_layout);
      kernels::Rope(&k[(size_t)b * kvd], e - b, kvd, c.n_kv_head, hd, &buf.pos[b], c.rope_base,
                    c.rope_layout);
      return;
    }
    // Partial RoPE (llada2): the first rope_dim values of each head turn as a head of rope_dim
    // (frequencies base^(-2i/rope_dim)), the rest pass unchanged; one head at a time.
    for (int h = 0; h < c.n_head; ++h) {
      kernels::Rope(&q[(size_t)b * qd + (size_t)h * hd], e - b, qd, 1, c.rope_dim, &buf.pos[b],
                    c.rope_base, c.rope_layout);
    }
    for (int h = 0; h < c.n_kv_head; ++h) {
      kernels::Rope(&k[(size_t)b * kvd + (size_t)h * hd], e - b, kvd, 1, c.rope_dim, &buf.pos[b],
                    c.rope_base, c.rope_layout);
    }
  });
}

// att = attention of each sequence's computed rows over all its tokens at layer l; captures the
// computed rows' K/V where asked.
void AttendSequences(const ModelConfig& c, const std::vector<SeqView>& seqs, const Layout& lay,
                     int l, Buffers& buf, ForwardStats* st) {
  const int qd = c.q_dim(), kvd = c.kv_dim(), hd = c.head_dim;
  const float *q = buf.q, *k = buf.k, *v = buf.v;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (size_t s = 0; s < seqs.size(); ++s) {
    const SeqPlan& p = *seqs[s].plan;
    const int n = seqs[s].n, pb = lay.pos_begin[s], pe = lay.pos_end[s], rb = lay.row_begin[s];
    const float* ks = &k[(size_t)rb * kvd];
    const float* vs = &v[(size_t)rb * kvd];
    // Block-causal models: the computed rows start at absolute position pb, the K/V rows (cached
    // and computed, in order) at 0.
    const kernels::AttentionMask mask{static_cast<size_t>(c.block_length), static_cast<size_t>(pb)};
    if (pe - pb != n) {
      // Partial layer: the cached rows before and after the computed range are read where they
      // lie in the sequence's K/V ([n, kvd]), the computed rows from this forward's buffers.
      const LayerKv& in = p.kv_in->layers[l];
      const size_t after = (size_t)pe * kvd;
      const kernels::KvSegment segs[3] = {
          {in.k.data(), in.v.data(), (size_t)pb},
          {ks, vs, (size_t)(pe - pb)},
          {in.k.data() + after, in.v.data() + after, (size_t)(n - pe)}};
      kernels::AttentionSegments(&q[(size_t)rb * qd], pe - pb, qd, segs, kvd, c.n_head, c.n_kv_head,
                                 hd, scale, &buf.att[(size_t)rb * qd], qd, mask);
    } else {
      kernels::Attention(&q[(size_t)rb * qd], pe - pb, qd, ks, vs, n, kvd, c.n_head, c.n_kv_head,
                         hd, scale, &buf.att[(size_t)rb * qd], qd, mask);
    }
    st->attention_flops += 4.0 * (pe - pb) * n * hd * c.n_head;
    if (p.kv_out && l < p.capture_kv_layers) {
      LayerKv& out = p.kv_out->layers[l];
      out.k.resize(static_cast<size_t>(n) * kvd);
      out.v.resize(static_cast<size_t>(n) * kvd);
      CopyRows(&out.k[(size_t)pb * kvd], &k[(size_t)rb * kvd], pe - pb, kvd);
      CopyRows(&out.v[(size_t)pb * kvd], &v[(size_t)rb * kvd], pe - pb, kvd);
    }
  }
}

// x += W_down(SwiGLU(W_gate h, W_up h)) with h = RMSNorm(x); for a routed layer l, x += MoE(h).
void FeedForward(const ModelConfig& c, const LayerWeights& w, int l, int R, Buffers& buf,
                 ForwardStats* st) {
  const int d = c.d_model, ff = c.d_ff;
  float *x = buf.x, *h = buf.h, *gate = buf.gate, *up = buf.up;
  ParallelRows(R, [&](int b, int e) {
    kernels::RmsNorm(&x[(size_t)b * d], w.ffn_norm.data(), &h[(size_t)b * d], e - b, d, c.rms_eps);
  });
  if (c.LayerIsMoe(l)) {
    MoeFeedForward(c, w, h, R, x, st);
    return;
  }
  Project(w.w_gate, h, R, gate, st);
  Project(w.w_up, h, R, up, st);
  ParallelRows(R, [&](int b, int e) {
    kernels::SwiGlu(&gate[(size_t)b * ff], &up[(size_t)b * ff], &gate[(size_t)b * ff],
                    (size_t)(e - b) * ff);
  });
  Project(w.w_down, gate, R, h, st);
  ParallelRows(R, [&](int b, int e) {
    kernels::AddInPlace(&x[(size_t)b * d], &h[(size_t)b * d], (size_t)(e - b) * d);
  });
}

// One transformer layer over layout `lay` (already rejoined for layer l).
void RunLayer(const Model& model, const std::vector<SeqView>& seqs, const Layout& lay, int l,
              Buffers& buf, ForwardStats* st) {
  const ModelConfig& c = model.config();
  const LayerWeights& w = model.layers()[l];
  const int d = c.d_model, R = lay.rows;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int p = lay.pos_begin[s]; p < lay.pos_end[s]; ++p)
      buf.pos[lay.row_begin[s] + p - lay.pos_begin[s]] = p;
  }
  CaptureHidden(seqs, lay, l, d, buf.x);
  st->token_layers += R;

  // ---- attention block ----
  ProjectQkv(c, w, R, buf, st);
  AttendSequences(c, seqs, lay, l, buf, st);
  Project(w.wo, buf.att, R, buf.h, st);
  ParallelRows(R, [&](int b, int e) {
    kernels::AddInPlace(&buf.x[(size_t)b * d], &buf.h[(size_t)b * d], (size_t)(e - b) * d);
  });

  // ---- feed-forward block (SwiGLU) ----
  FeedForward(c, w, l, R, buf, st);
}

// The output head on the requested rows only: RMSNorm, then the vocabulary projection into each
// plan's logits buffer.
void OutputHead(const Model& model, const std::vector<SeqView>& seqs, const Layout& lay,
                Buffers& buf, ForwardStats* st) {
  const ModelConfig& c = model.config();
  const int d = c.d_model;
  int out_rows = 0;
  for (const SeqView& s : seqs) out_rows += std::max(0, s.plan->logits_end - s.plan->logits_begin);
  if (out_rows == 0) return;
  float* sel = GrowTo(buf.sc->sel, static_cast<size_t>(out_rows) * d);  // [out_rows, d]
  // [out_rows, V]: one sequence's rows go straight into its own buffer (at a real vocabulary and
  // a whole canvas that is hundreds of MB not held twice); several sequences are stacked first.
  const SeqView* single = nullptr;
  for (const SeqView& s : seqs) {
    if (s.plan->logits_end > s.plan->logits_begin) single = single ? nullptr : &s;
  }
  const bool direct = single != nullptr && seqs.size() == 1;
  float* logits = direct ? single->plan->logits
                         : GrowTo(buf.sc->logits, static_cast<size_t>(out_rows) * c.n_vocab);
  int r = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const SeqPlan& p = *seqs[s].plan;
    for (int i = p.logits_begin; i < p.logits_end; ++i, ++r) {
      CopyRows(&sel[(size_t)r * d], &buf.x[(size_t)(lay.row_begin[s] + i - lay.pos_begin[s]) * d],
               1, d);
    }
  }
  ParallelRows(out_rows, [&](int b, int e) {
    kernels::RmsNorm(&sel[(size_t)b * d], model.output_norm().data(), &sel[(size_t)b * d], e - b, d,
                     c.rms_eps);
  });
  Project(model.output(), sel, out_rows, logits, st);
  if (direct) return;
  r = 0;
  for (const SeqView& s : seqs) {
    const SeqPlan& p = *s.plan;
    const int rows = std::max(0, p.logits_end - p.logits_begin);
    if (rows > 0) CopyRows(p.logits, &logits[(size_t)r * c.n_vocab], rows, c.n_vocab);
    r += rows;
  }
}

// How many layers the forward must run: all of them when any sequence wants logits; otherwise
// only up to the deepest capture asked for (a prefix build for BiCache at most depth b needs K/V of
// layers < b and the hidden state entering layer b, not the layers above it nor the head).
int LayersWanted(const ModelConfig& c, const std::vector<SeqView>& seqs) {
  int layers = 0;
  for (const SeqView& s : seqs) {
    const SeqPlan& p = *s.plan;
    if (p.logits_end > p.logits_begin) return c.n_layer;
    if (p.kv_out) layers = std::max({layers, p.capture_kv_layers, p.capture_hidden_max});
  }
  return layers;
}

// The calling thread's activation buffers, shared by Forward and ForwardLayers (a scheduler's
// worker runs both: one set of buffers, not two).
Scratch& ThreadScratch() {
  thread_local Scratch sc;
  return sc;
}

// Adds one call's figures (its time measured from t0) to the caller's.
void AddStats(ForwardStats st, std::chrono::steady_clock::time_point t0, ForwardStats* out) {
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!out) return;
  out->token_layers += st.token_layers;
  out->matmul_flops += st.matmul_flops;
  out->attention_flops += st.attention_flops;
  out->seconds += st.seconds;
}

}  // namespace

void Forward(const Model& model, std::span<const SeqPlan> plans, ForwardStats* stats_out) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = model.config();
  const std::vector<SeqView> seqs = Validate(c, plans);
  ForwardStats st;
  int max_rows = 0;
  for (const SeqView& v : seqs) max_rows += v.n;
  Buffers buf = GrowBuffers(c, static_cast<size_t>(max_rows), &ThreadScratch());

  Layout lay = MakeLayout(seqs, 0);
  Embed(model, seqs, lay, buf.x);
  const int layers = LayersWanted(c, seqs);
  for (int l = 0; l < layers; ++l) {
    Layout next = MakeLayout(seqs, l);
    if (next.rows != lay.rows) Rejoin(seqs, lay, next, l, c.d_model, buf);
    lay = std::move(next);
    RunLayer(model, seqs, lay, l, buf, &st);
  }
  CaptureHidden(seqs, lay, layers, c.d_model, buf.x);  // the last run layer's output, if asked
  OutputHead(model, seqs, lay, buf, &st);

  AddStats(st, t0, stats_out);
}

void ForwardLayers(const Model& model, std::span<const LayerChunk> chunks, int first, int last,
                   ForwardStats* stats_out) {
  const auto t0 = std::chrono::steady_clock::now();
  const ModelConfig& c = model.config();
  const int d = c.d_model;
  if (first < 0 || last > c.n_layer || first >= last)
    throw Error(ErrorKind::kInvalidArgument, "ForwardLayers: layer range out of bounds");
  std::vector<SeqPlan> plans;
  for (const LayerChunk& ch : chunks) {
    SeqPlan p;
    p.tokens = ch.tokens;
    p.kv_out = ch.kv_out;
    p.capture_kv_layers = ch.capture_kv_layers;
    p.capture_hidden_max = ch.capture_hidden_max;
    plans.push_back(p);
  }
  const std::vector<SeqView> seqs = Validate(c, plans);  // whole sequences: no partial layers
  ForwardStats st;
  int rows = 0;
  for (const SeqView& v : seqs) rows += v.n;
  Buffers buf = GrowBuffers(c, static_cast<size_t>(rows), &ThreadScratch());
  const Layout lay = MakeLayout(seqs, first);
  if (first == 0) {
    Embed(model, seqs, lay, buf.x);
  } else {
    for (size_t s = 0; s < chunks.size(); ++s) {
      const std::vector<float>& h = *chunks[s].hidden;
      if (h.size() != static_cast<size_t>(seqs[s].n) * d)
        BadPlan(s, "ForwardLayers: no input hidden state for layer " + std::to_string(first));
      CopyRows(&buf.x[static_cast<size_t>(lay.row_begin[s]) * d], h.data(), seqs[s].n, d);
    }
  }
  for (int l = first; l < last; ++l) RunLayer(model, seqs, lay, l, buf, &st);
  CaptureHidden(seqs, lay, last, d, buf.x);
  for (size_t s = 0; s < chunks.size(); ++s) {
    std::vector<float>& h = *chunks[s].hidden;
    h.resize(static_cast<size_t>(seqs[s].n) * d);
    CopyRows(h.data(), &buf.x[static_cast<size_t>(lay.row_begin[s]) * d], seqs[s].n, d);
  }
  AddStats(st, t0, stats_out);
}

}  // namespace bicache::model
