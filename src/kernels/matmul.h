// Matrix products through oneDNN (2.x `matmul::desc` API) in bf16 with float32 output.
//
// A Linear holds one weight matrix W: [out, in] (PyTorch convention; GGUF ne = {in, out}) in a
// format oneDNN multiplies directly: bf16 kept as-is (zero-copy from the mapped file), F32/F16
// converted to bf16 once at load, Q8_0/Q4_0 dequantised to bf16 once at load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "format/gguf.h"

namespace bicache::kernels {

class Linear {
 public:
  Linear();
  ~Linear();
  Linear(Linear&&) noexcept;
  Linear& operator=(Linear&&) noexcept;

  // Builds from a GGUF tensor with ne = {in, out}. Throws Error(kUnsupported) for a tensor type
  // it cannot convert. `data` must outlive the Linear when type is BF16 (zero-copy).
  static Linear FromTensor(const format::TensorInfo& t);
  // Builds from float32 values W: [out, in] (tests, tools).
  static Linear FromF32(const float* w, size_t out, size_t in);

  size_t in() const;
  size_t out() const;

  // y[n, out] = x[n, in] * W^T. x is float32 (converted to bf16 internally), y float32.
  // Thread count is oneDNN's (OpenMP, follows omp_set_num_threads).
  void Forward(const float* x, size_t n, float* y) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// C[m, n] = A[m, k] * B[k, n] in bf16 with float32 accumulation and output, through the same
// cached oneDNN primitives as Linear (attention's Q*K^T and P*V use it). A is row-major [m, k];
// B is row-major [k, n], or stored as its transpose [n, k] when b_transposed; C is row-major
// [m, n]. Throws Error(kInternal) naming the shape when oneDNN fails.
void GemmBf16(const uint16_t* a, size_t m, size_t k, const uint16_t* b, size_t n, bool b_transposed,
              float* c);

// Dequantise n elements (n a multiple of the type's block size) of a stored tensor to float32.
// Supports F32, F16, BF16, Q8_0, Q4_0. Throws Error(kUnsupported) otherwise.
void DequantizeRow(format::TensorType type, const void* src, float* dst, size_t n);

// Plain oneDNN bf16 GEMM used as the benchmark yardstick: C[m,n] = A[m,k] * B[k,n].
// Returns achieved GFLOP/s over `iters` runs after one warm-up.
double MeasureGemmGflops(size_t m, size_t n, size_t k, int iters);

}  // namespace bicache::kernels
