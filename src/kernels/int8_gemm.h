// Integer products for Q8_0 weights on CPUs with AVX512-VNNI: activations are quantized per
// 32-element block to int8 (as llama.cpp does for its quantized matmuls), each block's dot product
// is exact in int32 (vpdpbusd: u8 weights x s8 activations), and the two block scales are applied
// once per block. Faster than dequantizing the weights to bf16 for oneDNN (docs/benchmarks.md,
// "Real-width models"), at the cost of rounding the activations to 8 bits per block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bicache::kernels {

// Whether the Q8_0 tile route can run: ActiveIntIsa() is AVX512-VNNI (so BICACHE_INT8 is not "0"
// or "avx2") and the bf16 matmul path is active. Linear takes it above FewRowsCutover's rows
// (kernels/linear_route.h).
bool Int8RouteAvailable();

// Per-32 quantization of activations x: [n, k] (k a multiple of 32) into q: [n, k] int8, d: [n,
// k/32] scales (absmax / 127; 0 for an all-zero block) and s: [n, k/32] block sums of q. The
// quantized value is nearbyint(x * (127 / absmax)) in float, ties to even: what the SIMD code does.
void QuantizeActivationsQ8(const float* x, size_t n, size_t k, int8_t* q, float* d, int32_t* s);

// y[n, out] = x[n, in] * W^T, W: [out, in] in ggml Q8_0 rows `row_bytes` apart. Parallel over
// panels of 32 output columns (OpenMP). Requires Int8RouteAvailable(); throws otherwise.
void Int8ForwardQ8_0(const float* x, size_t n, size_t in, const uint8_t* w, size_t row_bytes,
                     size_t out, float* y);

}  // namespace bicache::kernels
