// Tiled online-softmax attention (ops.h Attention), Highway with run-time dispatch.
//
// Work item = (query head h, block of query rows). For each tile of kv rows it packs
//   Kt: [head_dim, T]   the K tile transposed, so scores for one query row come out T lanes at a
//                       time with broadcast-FMA (no horizontal sums), and
//   Vp: [T, hd_pad]     the V tile, rows padded to whole vectors with zeros,
// then processes the block's rows kRows at a time: scores S = q*K^T (kRows x T, held in
// registers), running max / sum update, acc = acc*corr + P*V. Packing costs 2*T*head_dim copies
// per tile, amortised over the block's rows (up to 128: at 32 the scalar transpose cost ~1/3 of
// the time at head_dim 64). Memory per thread: O(T*head_dim + block*head_dim).
//
// Few query rows (a cached forward: a dual-cache block of 8 rows, a request suffix against a long
// cached prefix) cannot amortise that transpose: at 1 query row against 512 K/V rows it was
// nearly all of the time. Blocks of at most kDirectMaxRows rows take AttendDirect instead: the
// queries are transposed (Qt: [head_dim, N], one lane per query row, N rows per group) and each
// K row is read where it lies, one broadcast-FMA per element, so scores come out as one vector
// per K row across the group's query rows; the softmax update runs on those vectors too, and
// P*V reads V rows in place when head_dim needs no padding.
// clang-format off: Highway needs foreach_target.h, then highway.h, in this order
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cpp"
#include <hwy/foreach_target.h>  // re-includes this file once per target

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <omp.h>

#include "kernels/ops.h"
#include "util/grow.h"

HWY_BEFORE_NAMESPACE();
namespace bicache::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Rows per register block: 4 rows x 4 vectors = 16 accumulators fit AVX-512's 32 registers;
// targets with 16 registers use 2 rows.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kRows = 4;
#else
constexpr size_t kRows = 2;
#endif
constexpr size_t kTileVecs = 4;     // kv tile T = 4 vectors (64 on AVX-512, 32 on AVX2)
constexpr size_t kMaxQBlock = 128;  // query rows per work item (power of two, >= kRows)
constexpr size_t kMinQBlock = 16;
constexpr size_t kDirectMaxRows = 16;  // blocks this small take AttendDirect (tuned: kernels_bench)
constexpr float kMaskedScore = -1e30f;  // exp(kMaskedScore - max) == 0 exactly

struct Scratch {
  std::vector<float> kt, vp, qs, s, acc, m, l;
  std::vector<float> qt, st, p;         // AttendDirect: [hd, N], [T, N], [N, T]
  std::vector<const float*> kp, vrows;  // [T] K row, V row (in place or in Vp) per tile row
};

// Lane-wise max of the n >= 1 vectors at p[0 .. n*N).
HWY_INLINE VF MaxOfVecs(const float* p, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF m = hn::LoadU(df, p);
  for (size_t i = 1; i < n; ++i) m = hn::Max(m, hn::LoadU(df, p + i * N));
  return m;
}

// p[i] = exp(p[i] - m) over the n vectors at p[0 .. n*N); returns their lane-wise sum.
HWY_INLINE VF ExpInPlace(float* p, size_t n, VF m) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF sum = hn::Zero(df);
  for (size_t i = 0; i < n; ++i) {
    const VF e = hn::Exp(df, hn::Sub(hn::LoadU(df, p + i * N), m));
    sum = hn::Add(sum, e);
    hn::StoreU(e, df, p + i * N);
  }
  return sum;
}

// Walks the K/V rows of the segments in order (empty segments are dropped before the kernels run):
// Next gives row j's K and V for kv head g.
struct RowCursor {
  const KvSegment* segs;
  size_t kv_stride, off;  // off = g * head_dim
  size_t seg = 0, row = 0;
  void Next(const float** k, const float** v) {
    while (row == segs[seg].n) {
      ++seg;
      row = 0;
    }
    *k = segs[seg].k + row * kv_stride + off;
    *v = segs[seg].v + row * kv_stride + off;
    ++row;
  }
};

// S[r][0..T) = Qs[r] . Kt[:, 0..T) for kRows rows. Qs rows are pre-scaled, stride hd.
HWY_INLINE void Scores(const float* qs, size_t hd, const float* kt, size_t T, float* s) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF a[kRows][kTileVecs];
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (size_t c = 0; c < kTileVecs; ++c) a[r][c] = hn::Zero(df);
  }
  for (size_t d = 0; d < hd; ++d) {
    const float* krow = kt + d * T;
    VF kv[kTileVecs];
#pragma GCC unroll 4
    for (size_t c = 0; c < kTileVecs; ++c) kv[c] = hn::LoadU(df, krow + c * N);
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r) {
      const VF qv = hn::Set(df, qs[r * hd + d]);
#pragma GCC unroll 4
      for (size_t c = 0; c < kTileVecs; ++c) a[r][c] = hn::MulAdd(qv, kv[c], a[r][c]);
    }
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (size_t c = 0; c < kTileVecs; ++c) hn::StoreU(a[r][c], df, s + r * T + c * N);
  }
}

// acc[r][dv0 .. dv0+NV*N) = acc*corr[r] + sum_j P[r][j] * V_j[dv0 ..]   for kRows rows; V_j is
// vrows[j]: a zero-padded Vp row, or the V row in place when hd is a whole number of vectors.
template <size_t NV>
HWY_INLINE void PvChunk(const float* p, size_t T, const float* const* vrows, size_t hdp, size_t len,
                        const float* corr, float* acc, size_t dv0) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF a[kRows][NV];
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r) {
    const VF cr = hn::Set(df, corr[r]);
#pragma GCC unroll 4
    for (size_t c = 0; c < NV; ++c)
      a[r][c] = hn::Mul(hn::LoadU(df, acc + r * hdp + dv0 + c * N), cr);
  }
  for (size_t j = 0; j < len; ++j) {
    const float* vrow = vrows[j] + dv0;
    VF vv[NV];
#pragma GCC unroll 4
    for (size_t c = 0; c < NV; ++c) vv[c] = hn::LoadU(df, vrow + c * N);
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r) {
      const VF pr = hn::Set(df, p[r * T + j]);
#pragma GCC unroll 4
      for (size_t c = 0; c < NV; ++c) a[r][c] = hn::MulAdd(pr, vv[c], a[r][c]);
    }
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (size_t c = 0; c < NV; ++c) hn::StoreU(a[r][c], df, acc + r * hdp + dv0 + c * N);
  }
}

// Query rows [q0, q1) of head h, at most N of them (one lane each); see the file comment.
void AttendDirect(const float* q, size_t q0, size_t q1, size_t q_stride, const KvSegment* segs,
                  size_t n_kv, size_t kv_stride, size_t h, size_t g, size_t hd, float scale,
                  float* out, size_t out_stride, AttentionMask mask, Scratch& sc) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t T = kTileVecs * N;
  const size_t hdp = (hd + N - 1) / N * N;
  const size_t rows = q1 - q0;
  const size_t rows_pad = (rows + kRows - 1) / kRows * kRows;  // <= max(N, kRows)
  const bool in_place = hd == hdp;  // V rows need no padding: P*V reads them where they lie

  // Qt[d][r] = q[q0 + r][h*hd + d] * scale, zero for lanes r >= rows.
  float* qt = sc.qt.data();  // [hd, N]
  std::fill(qt, qt + hd * N, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    const float* qr = q + (q0 + r) * q_stride + h * hd;
    for (size_t i = 0; i < hd; ++i) qt[i * N + r] = qr[i] * scale;
  }
  std::fill(sc.acc.begin(), sc.acc.begin() + rows_pad * hdp, 0.0f);
  if (!in_place) std::fill(sc.vp.begin(), sc.vp.begin() + T * hdp, 0.0f);
  VF m = hn::Set(df, -std::numeric_limits<float>::infinity());  // running max per query lane
  VF l = hn::Zero(df);                                          // running sum per query lane
  float* st = sc.st.data();   // [T + 8, N] scores, then probabilities: one vector per K row
  float* p = sc.p.data();     // [rows_pad, T] the same, row-major for PvChunk
  float* corr = sc.m.data();  // [max(N, kRows)] per-row rescale of acc for this tile
  float* lanes =
      sc.l.data();  // [N] one vector's lanes as scalars (the previous max, then the sums)

  RowCursor rows_at{segs, kv_stride, g * hd};
  for (size_t j0 = 0; j0 < n_kv; j0 += T) {
    const size_t len = std::min(T, n_kv - j0);
    for (size_t j = 0; j < len; ++j) {
      const float* vj;
      rows_at.Next(&sc.kp[j], &vj);
      if (in_place) {
        sc.vrows[j] = vj;
      } else {
        std::copy(vj, vj + hd, sc.vp.data() + j * hdp);
        sc.vrows[j] = sc.vp.data() + j * hdp;
      }
    }
    // Scores: st[j] = sum_d Qt[d] * K_j[d], eight K rows at a time (independent FMA chains).
    for (size_t j = 0; j < len; j += 8) {
      const size_t nj = std::min<size_t>(8, len - j);
      const float* kr[8];
      for (size_t jj = 0; jj < 8; ++jj)
        kr[jj] = sc.kp[j + std::min(jj, nj - 1)];  // tail: repeats, dropped
      VF a[8];
#pragma GCC unroll 8
      for (size_t jj = 0; jj < 8; ++jj) a[jj] = hn::Zero(df);
      for (size_t d = 0; d < hd; ++d) {
        const VF qv = hn::LoadU(df, qt + d * N);
#pragma GCC unroll 8
        for (size_t jj = 0; jj < 8; ++jj) a[jj] = hn::MulAdd(qv, hn::Set(df, kr[jj][d]), a[jj]);
      }
#pragma GCC unroll 8
      for (size_t jj = 0; jj < 8; ++jj)
        hn::StoreU(a[jj], df, st + (j + jj) * N);  // st has 8 spare rows
    }
    if (mask.block != 0) {  // block-causal: rows past each query row's last visible K/V row
      for (size_t r = 0; r < rows; ++r) {
        const size_t end = mask.KvEnd(q0 + r, n_kv);
        for (size_t j = end > j0 ? end - j0 : 0; j < len; ++j) st[j * N + r] = kMaskedScore;
      }
    }
    // Online softmax across the tile, every query lane at once.
    const VF m_new = hn::Max(m, MaxOfVecs(st, len));
    const VF vsum = ExpInPlace(st, len, m_new);
    hn::StoreU(m, df, lanes);
    hn::StoreU(m_new, df, corr);
    for (size_t r = 0; r < N; ++r) corr[r] = std::exp(lanes[r] - corr[r]);  // 0 on the first tile
    for (size_t r = N; r < rows_pad; ++r) corr[r] = 0.0f;  // padding rows (only when N < kRows)
    l = hn::MulAdd(l, hn::LoadU(df, corr), vsum);
    m = m_new;
    // P*V: probabilities row-major, then the register-blocked update of acc.
    for (size_t r = 0; r < rows; ++r) {
      for (size_t j = 0; j < len; ++j) p[r * T + j] = st[j * N + r];
    }
    std::fill(p + rows * T, p + rows_pad * T, 0.0f);
    for (size_t r0 = 0; r0 < rows_pad; r0 += kRows) {
      float* acc = sc.acc.data() + r0 * hdp;
      size_t dv = 0;
      for (; dv + 4 * N <= hdp; dv += 4 * N)
        PvChunk<4>(p + r0 * T, T, sc.vrows.data(), hdp, len, corr + r0, acc, dv);
      for (; dv < hdp; dv += N)
        PvChunk<1>(p + r0 * T, T, sc.vrows.data(), hdp, len, corr + r0, acc, dv);
    }
  }

  hn::StoreU(l, df, lanes);
  for (size_t r = 0; r < rows; ++r) {
    float* o = out + (q0 + r) * out_stride + h * hd;
    const float inv = 1.0f / lanes[r];
    const float* a = sc.acc.data() + r * hdp;
    for (size_t i = 0; i < hd; ++i) o[i] = a[i] * inv;
  }
}

// One work item: query rows [q0, q1) of head h.
// Block-causal masks: K/V rows past the block's last row's view are never read (n_kv shrinks to
// it), and within that each row's scores past its own view are masked. Every row sees K/V row 0,
// so the first tile gives each row a finite running max.
void AttendBlock(const float* q, size_t q0, size_t q1, size_t q_stride, const KvSegment* segs,
                 size_t n_kv, size_t kv_stride, size_t h, size_t g, size_t hd, float scale,
                 float* out, size_t out_stride, AttentionMask mask, Scratch& sc) {
  n_kv = mask.KvEnd(q1 - 1, n_kv);
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t T = kTileVecs * N;
  const size_t hdp = (hd + N - 1) / N * N;
  const size_t rows = q1 - q0;
  const size_t rows_pad = (rows + kRows - 1) / kRows * kRows;
  if (rows <= kDirectMaxRows) {
    for (size_t r = q0; r < q1; r += N) {
      AttendDirect(q, r, std::min(q1, r + N), q_stride, segs, n_kv, kv_stride, h, g, hd, scale, out,
                   out_stride, mask, sc);
    }
    return;
  }

  // Qs: [rows_pad, hd] scaled queries (padding rows are zero and their results dropped).
  std::fill(sc.qs.begin(), sc.qs.begin() + rows_pad * hd, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    const float* qr = q + (q0 + r) * q_stride + h * hd;
    for (size_t i = 0; i < hd; ++i) sc.qs[r * hd + i] = qr[i] * scale;
  }
  std::fill(sc.acc.begin(), sc.acc.begin() + rows_pad * hdp, 0.0f);
  std::fill(sc.m.begin(), sc.m.begin() + rows_pad, -std::numeric_limits<float>::infinity());
  std::fill(sc.l.begin(), sc.l.begin() + rows_pad, 0.0f);
  // Vp padding columns stay zero for the whole call; only [0, hd) of each row is rewritten.
  std::fill(sc.vp.begin(), sc.vp.begin() + T * hdp, 0.0f);

  RowCursor rows_at{segs, kv_stride, g * hd};
  for (size_t j0 = 0; j0 < n_kv; j0 += T) {
    const size_t len = std::min(T, n_kv - j0);
    for (size_t j = 0; j < len; ++j) {
      const float *kj, *vj;
      rows_at.Next(&kj, &vj);
      for (size_t i = 0; i < hd; ++i) sc.kt[i * T + j] = kj[i];
      std::copy(vj, vj + hd, sc.vp.data() + j * hdp);
      sc.vrows[j] = sc.vp.data() + j * hdp;
    }
    for (size_t j = len; j < T; ++j) {
      for (size_t i = 0; i < hd; ++i) sc.kt[i * T + j] = 0.0f;
    }

    for (size_t r0 = 0; r0 < rows_pad; r0 += kRows) {
      float* s = sc.s.data();  // [kRows, T]
      Scores(sc.qs.data() + r0 * hd, hd, sc.kt.data(), T, s);
      float corr[kRows];
      for (size_t r = 0; r < kRows; ++r) {
        float* sr = s + r * T;
        const size_t end = mask.KvEnd(std::min(q0 + r0 + r, q1 - 1), n_kv);  // padding: last row's
        for (size_t j = std::min(len, end > j0 ? end - j0 : 0); j < T; ++j) sr[j] = kMaskedScore;
        const float m_old = sc.m[r0 + r];
        const float m_new =
            std::max(m_old, hn::GetLane(hn::MaxOfLanes(df, MaxOfVecs(sr, kTileVecs))));
        const VF vsum = ExpInPlace(sr, kTileVecs, hn::Set(df, m_new));
        corr[r] = std::exp(m_old - m_new);  // 0 on the first tile (m_old = -inf)
        sc.l[r0 + r] = sc.l[r0 + r] * corr[r] + hn::GetLane(hn::SumOfLanes(df, vsum));
        sc.m[r0 + r] = m_new;
      }
      float* acc = sc.acc.data() + r0 * hdp;
      size_t dv = 0;
      for (; dv + 4 * N <= hdp; dv += 4 * N)
        PvChunk<4>(s, T, sc.vrows.data(), hdp, len, corr, acc, dv);
      for (; dv < hdp; dv += N) PvChunk<1>(s, T, sc.vrows.data(), hdp, len, corr, acc, dv);
    }
  }

  for (size_t r = 0; r < rows; ++r) {
    float* o = out + (q0 + r) * out_stride + h * hd;
    const float inv = 1.0f / sc.l[r];
    const float* a = sc.acc.data() + r * hdp;
    for (size_t i = 0; i < hd; ++i) o[i] = a[i] * inv;
  }
}

void AttentionImpl(const float* q, size_t n_q, size_t q_stride, const KvSegment* segs, size_t n_kv,
                   size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim, float scale,
                   float* out, size_t out_stride, AttentionMask mask) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t T = kTileVecs * N;
  const size_t hdp = (head_dim + N - 1) / N * N;
  const size_t group = n_head / n_kv_head;
  // Largest block that still leaves ~4 work items per thread for load balance.
  const size_t threads = static_cast<size_t>(omp_get_max_threads());
  size_t qblock = kMaxQBlock;
  while (qblock > kMinQBlock && (n_q + qblock - 1) / qblock * n_head < 4 * threads) qblock /= 2;
  const size_t n_qblocks = (n_q + qblock - 1) / qblock;
  const long n_items = static_cast<long>(n_qblocks * n_head);
#pragma omp parallel
  {
    // Per thread and only ever grown (OpenMP keeps its threads): allocating these on every call
    // showed up in small cached forwards, which call attention once per layer.
    thread_local Scratch sc;
    GrowTo(sc.kt, head_dim * T);
    GrowTo(sc.vp, T * hdp);
    GrowTo(sc.qs, qblock * head_dim);
    GrowTo(sc.s, kRows * T);
    GrowTo(sc.l, std::max(qblock, N));
    GrowTo(sc.m, std::max(qblock, N));
    GrowTo(sc.qt, head_dim * N);
    GrowTo(sc.st, (T + 8) * N);
    GrowTo(sc.p, std::max(kRows, N) * T);
    GrowTo(sc.acc, std::max(qblock, N) * hdp);
    GrowTo(sc.kp, T);
    GrowTo(sc.vrows, T);
    // Items are ordered head-major so consecutive items of one thread reuse the same K/V head.
#pragma omp for schedule(dynamic, 1)
    for (long item = 0; item < n_items; ++item) {
      const size_t h = static_cast<size_t>(item) / n_qblocks;
      const size_t qb = static_cast<size_t>(item) % n_qblocks;
      const size_t q0 = qb * qblock;
      const size_t q1 = std::min(n_q, q0 + qblock);
      AttendBlock(q, q0, q1, q_stride, segs, n_kv, kv_stride, h, h / group, head_dim, scale, out,
                  out_stride, mask, sc);
    }
  }
}

}  // namespace bicache::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>

#include "util/error.h"

namespace bicache::kernels {

HWY_EXPORT(AttentionImpl);

void Attention(const float* q, size_t n_q, size_t q_stride, const float* k, const float* v,
               size_t n_kv, size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim,
               float scale, float* out, size_t out_stride, AttentionMask mask) {
  const KvSegment one{k, v, n_kv};
  AttentionSegments(q, n_q, q_stride, std::span<const KvSegment>(&one, 1), kv_stride, n_head,
                    n_kv_head, head_dim, scale, out, out_stride, mask);
}

void AttentionSegments(const float* q, size_t n_q, size_t q_stride, std::span<const KvSegment> segs,
                       size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim,
                       float scale, float* out, size_t out_stride, AttentionMask mask) {
  size_t n_kv = 0;
  for (const KvSegment& sg : segs) n_kv += sg.n;
  if (n_head == 0 || n_kv_head == 0 || n_head % n_kv_head != 0) {
    throw Error(ErrorKind::kInvalidArgument, "attention: n_head " + std::to_string(n_head) +
                                                 " is not a positive multiple of n_kv_head " +
                                                 std::to_string(n_kv_head));
  }
  if (head_dim == 0 || (n_q > 1 && q_stride < n_head * head_dim) ||
      (n_kv > 1 && kv_stride < n_kv_head * head_dim) ||
      (n_q > 1 && out_stride < n_head * head_dim)) {
    throw Error(ErrorKind::kInvalidArgument, "attention: a row stride is smaller than its row");
  }
  if (n_q == 0) return;
  if (n_kv == 0) {  // nothing to attend to: define the result as zeros
    for (size_t t = 0; t < n_q; ++t)
      std::fill(out + t * out_stride, out + t * out_stride + n_head * head_dim, 0.0f);
    return;
  }
  // Empty segments are dropped so the row walk in AttendBlock never has to skip one at its end.
  KvSegment kept[kMaxKvSegments];
  size_t n_kept = 0;
  for (const KvSegment& sg : segs) {
    if (sg.n == 0) continue;
    if (n_kept == kMaxKvSegments) {
      throw Error(ErrorKind::kInvalidArgument,
                  "attention: more than " + std::to_string(kMaxKvSegments) + " K/V segments");
    }
    kept[n_kept++] = sg;
  }
  if (n_q >= kAttentionGemmMinRows && n_kv >= kAttentionGemmMinKv) {
    AttentionGemm(q, n_q, q_stride, std::span<const KvSegment>(kept, n_kept), kv_stride, n_head,
                  n_kv_head, head_dim, scale, out, out_stride, mask);
    return;
  }
  HWY_DYNAMIC_DISPATCH(AttentionImpl)
  (q, n_q, q_stride, kept, n_kv, kv_stride, n_head, n_kv_head, head_dim, scale, out, out_stride,
   mask);
}

}  // namespace bicache::kernels
#endif  // HWY_ONCE
