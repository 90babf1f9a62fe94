// Element-wise and row kernels of the forward pass (Highway, runtime dispatch).
//
// Each function here has a plain scalar twin in kernels/reference.h used by the tests. Buffers are
// row-major float32 unless stated otherwise; no function allocates on the hot path except where
// noted. Callers parallelise over rows/heads with OpenMP; these kernels are single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace bicache::kernels {

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w[:]   x,out: [rows, d], w: [d]. out may ==
// x.
void RmsNorm(const float* x, const float* w, float* out, size_t rows, size_t d, float eps);

// RoPE layouts. kNormal rotates adjacent pairs (2i, 2i+1) (llama.cpp "normal", used by `llada`
// files whose Q/K rows the converter permuted); kNeox rotates (i, i + head_dim/2) (Dream).
enum class RopeLayout { kNormal, kNeox };

// In place on x: [n_tok, n_head, head_dim] (row stride `row_stride` floats between tokens).
// Token t is rotated for position pos[t]: theta_i = pos * freq_base^(-2i/head_dim).
void Rope(float* x, size_t n_tok, size_t row_stride, size_t n_head, size_t head_dim,
          const int32_t* pos, float freq_base, RopeLayout layout);

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void SwiGlu(const float* gate, const float* up, float* out, size_t n);

// y[i] += x[i]
void AddInPlace(float* y, const float* x, size_t n);

// y[r, :] += b[:] for rows r (bias broadcast). y: [rows, d]
void AddBiasRows(float* y, const float* b, size_t rows, size_t d);

// In-place softmax of one row; returns nothing. Stable (subtracts max).
void Softmax(float* x, size_t n);

// float32 <-> bfloat16 (round to nearest even) and float16 conversions.
void F32ToBf16(const float* src, uint16_t* dst, size_t n);
void Bf16ToF32(const uint16_t* src, float* dst, size_t n);
void F16ToF32(const uint16_t* src, float* dst, size_t n);

// Which K/V rows a query row may attend to. block == 0: all of them (bidirectional). Otherwise
// block-causal: query row t is at absolute position q_pos0 + t, K/V row j at position j (the K/V
// rows, or the segments' concatenation, start at position 0), and t sees j iff
// j / block <= (q_pos0 + t) / block: bidirectional inside a block, causal across blocks. The mask
// depends on absolute positions only, so cached K/V of a prefix stay valid inside a longer request.
struct AttentionMask {
  size_t block = 0;
  size_t q_pos0 = 0;
  // One past the last K/V row that query row t sees, out of n_kv (>= 1 when n_kv >= 1).
  size_t KvEnd(size_t t, size_t n_kv) const {
    if (block == 0) return n_kv;
    const size_t end = ((q_pos0 + t) / block + 1) * block;
    return end < n_kv ? end : n_kv;
  }
};

// Multi-head attention with grouped-query heads (bidirectional, or block-causal by `mask`), tiled
// with online softmax so memory is O(head_dim) per query row, not O(n_kv).
//   q:   [n_q,  q_stride]  query head h at q + t*q_stride + h*head_dim
//   k,v: [n_kv, kv_stride] kv head g at k + t*kv_stride + g*head_dim
//   out: [n_q,  out_stride]
// Query head h uses kv head h / (n_head / n_kv_head). scale is usually 1/sqrt(head_dim).
// Parallelised internally over (query tile, head) with OpenMP.
void Attention(const float* q, size_t n_q, size_t q_stride, const float* k, const float* v,
               size_t n_kv, size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim,
               float scale, float* out, size_t out_stride, AttentionMask mask = {});

// The same attention over K/V rows held in up to kMaxKvSegments pieces (same kv_stride), attended
// as their concatenation in order: a partial layer's cached prefix rows and its freshly computed
// rows are read where they lie instead of being copied into one [n_kv] buffer per layer and step.
struct KvSegment {
  const float* k;  // [n, kv_stride]
  const float* v;  // [n, kv_stride]
  size_t n;
};
constexpr size_t kMaxKvSegments = 4;
void AttentionSegments(const float* q, size_t n_q, size_t q_stride, std::span<const KvSegment> segs,
                       size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim,
                       float scale, float* out, size_t out_stride, AttentionMask mask = {});

// Blocks of at least kAttentionGemmMinRows query rows (against at least kAttentionGemmMinKv K/V
// rows) run through oneDNN bf16 matmuls (attention_gemm.cpp: Q*K^T, softmax, P*V, with Q*scale, K,
// V and P rounded to bf16 as in the trainer's bf16 autocast; ref::AttentionBf16 is its reference);
// smaller ones through the fp32 tiled kernel. AttentionGemm is that path alone (same arguments as
// AttentionSegments, already validated; no empty segment).
constexpr size_t kAttentionGemmMinRows = 64;
constexpr size_t kAttentionGemmMinKv = 64;
void AttentionGemm(const float* q, size_t n_q, size_t q_stride, std::span<const KvSegment> segs,
                   size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim, float scale,
                   float* out, size_t out_stride, AttentionMask mask = {});

}  // namespace bicache::kernels
