// Plain scalar twins of the kernels in ops.h / matmul.h, written for clarity, not speed.
//
// The tests compare every optimised kernel against these on awkward sizes. They accumulate in
// double where that is cheap, so they are the more accurate side of every comparison. Rope's
// angle table (RopeCosSin) is also used by the production kernel so both rotate by bit-identical
// cos/sin values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/tensor_type.h"
#include "kernels/ops.h"

namespace bicache::kernels::ref {

// Scalar conversions. Bf16FromF32 rounds to nearest even and keeps NaN a (quiet) NaN.
uint16_t Bf16FromF32(float x);
float F32FromBf16(uint16_t h);
float F32FromF16(uint16_t h);  // IEEE binary16 incl. subnormals, inf and NaN

// The rotation angle of pair i at position pos, computed in double: pos * base^(-2i/head_dim).
// Writes float cos/sin of it. Shared with the fast Rope so both use the same table values.
void RopeCosSin(int64_t pos, size_t i, size_t head_dim, double freq_base, float* c, float* s);

void RmsNorm(const float* x, const float* w, float* out, size_t rows, size_t d, float eps);
void Rope(float* x, size_t n_tok, size_t row_stride, size_t n_head, size_t head_dim,
          const int32_t* pos, float freq_base, RopeLayout layout);
void SwiGlu(const float* gate, const float* up, float* out, size_t n);
void Softmax(float* x, size_t n);

// Naive two-pass attention: all scores of a row, max, exp, normalise, weighted sum of v.
// Same argument meaning as kernels::Attention. Memory O(n_kv) per row.
void Attention(const float* q, size_t n_q, size_t q_stride, const float* k, const float* v,
               size_t n_kv, size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim,
               float scale, float* out, size_t out_stride);
// The same with the bf16 rounding points of the oneDNN path (attention_gemm.cpp): q * scale, k
// and v rounded to bf16, scores and softmax in double, the softmax numerators rounded to bf16 for
// the weighted sum of v, divided by the unrounded sum.
void AttentionBf16(const float* q, size_t n_q, size_t q_stride, const float* k, const float* v,
                   size_t n_kv, size_t kv_stride, size_t n_head, size_t n_kv_head, size_t head_dim,
                   float scale, float* out, size_t out_stride);
// Both under an attention mask: a K/V row past mask.KvEnd(t) takes no part in row t's softmax (it
// is skipped outright, not given a large negative score).
void AttentionMasked(const float* q, size_t n_q, size_t q_stride, const float* k, const float* v,
                     size_t n_kv, size_t kv_stride, size_t n_head, size_t n_kv_head,
                     size_t head_dim, float scale, float* out, size_t out_stride,
                     AttentionMask mask);
void AttentionBf16Masked(const float* q, size_t n_q, size_t q_stride, const float* k,
                         const float* v, size_t n_kv, size_t kv_stride, size_t n_head,
                         size_t n_kv_head, size_t head_dim, float scale, float* out,
                         size_t out_stride, AttentionMask mask);

// Block-by-block dequantisation (same contract as kernels::DequantizeRow).
void DequantizeRow(format::TensorType type, const void* src, float* dst, size_t n);

// kernels::Int8ForwardQ8_0's arithmetic, one value at a time: x quantized per 32 like
// kernels::QuantizeActivationsQ8 (absmax / 127, nearbyint(x * (127 / absmax)) in float), each
// block's integer dot product with the Q8_0 weight block, scaled by float(d_w * d_x) and summed in
// double. W: [out, in] ggml Q8_0 rows `row_bytes` apart.
void Q8_0ProductInt8(const float* x, size_t n, size_t in, const uint8_t* w, size_t row_bytes,
                     size_t out, float* y);

// The few-row route's weights (kernels/few_rows.h), one superblock of 256 values at a time: the
// integers v[256] and, per sub-block j of `sub` values (16 or 32; the return value), a scale a[j]
// and an offset b[j] with w = a v - b (bit-for-bit what the decoders' float arithmetic gives, up
// to one rounding of a v). Unsigned v for every type but Q8_0, IQ4_NL and IQ4_XS (their signed
// quants). Returns 0 for a type the route does not take. `sb` points at the superblock (8 blocks
// of a 32-value type).
int DecodeIntSuperblock(format::TensorType type, const uint8_t* sb, int* v, float* a, float* b);

// kernels::FewRowsForward's arithmetic, and for the K-quants kernels::KQuantTileForward's (the
// many-row route computes the same sums: kernels/kquant_tile.h), one value at a time: x quantized
// as in Q8_0ProductInt8,
// per 32 values, or per 256 for the K-quants (kernels::FewRowsPer256), W decoded by
// DecodeIntSuperblock, and per sub-block
//   y += a dx sum(v q) - b dx sum(q)
// (dx the scale of the activation block holding the sub-block), summed in double.
void FewRowsProduct(format::TensorType type, const float* x, size_t n, size_t in, const uint8_t* w,
                    size_t row_bytes, size_t out, float* y);

// y[n, out] = x[n, in] * W^T with W: [out, in] float32, accumulated in double.
void MatMulNT(const float* x, const float* w, float* y, size_t n, size_t in, size_t out);

}  // namespace bicache::kernels::ref
