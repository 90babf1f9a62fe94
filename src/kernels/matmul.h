// Matrix products through oneDNN (2.x `matmul::desc` API) in bf16 with float32 output, or in f32 on
// CPUs for which oneDNN has no bf16 matmul (ActiveMatmulPrecision).
//
// A Linear holds one weight matrix W: [out, in] (PyTorch convention; GGUF ne = {in, out}):
//  - BF16: read in place from the mapped file (zero-copy);
//  - F32/F16: converted to bf16 once at load (widened again to f32 on the f32 path);
//  - block-quantized types (Q4_0 ... Q6_K, IQ4_NL, IQ4_XS): kept in the file's format, in place;
//    each product dequantizes one panel of weight rows at a time into a per-thread bf16 buffer of
//    about half a MiB (L2-sized) and multiplies it with oneDNN's bf16 kernel, so resident memory
//    stays the file's size. On the f32 path BF16 files take the same panel route (widened per
//    panel), so neither path doubles a BF16 model in memory.
// On the f32 path every operand is rounded to bf16 first and then widened, and activations are
// rounded to bf16 before the multiply, so both paths compute the same products.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "format/tensor_type.h"

namespace bicache::kernels {

// The operand type of every matmul in this process. kBf16 where oneDNN has a bf16 kernel for this
// CPU other than its reference one (AVX-512 with or without BF16, AMX); kF32 elsewhere (AVX2
// only, where oneDNN 2.6 cannot build a bf16 matmul at all).
enum class MatmulPrecision { kBf16, kF32 };

// Decided once per process: the environment variable BICACHE_MATMUL (auto | bf16 | f32; unset =
// auto) or, for auto, Bf16MatmulAvailable(). Throws Error(kInvalidArgument) for another value and
// Error(kUnsupported) for bf16 on a CPU without a bf16 kernel (each call retries).
MatmulPrecision ActiveMatmulPrecision();
// BICACHE_MATMUL's value: nullopt for "" or "auto"; throws Error(kInvalidArgument) naming it
// when it is none of auto, bf16, f32.
std::optional<MatmulPrecision> ParseMatmulPrecision(std::string_view value);
// Whether oneDNN builds a non-reference bf16 matmul on this CPU (probed once).
bool Bf16MatmulAvailable();
const char* MatmulPrecisionName(MatmulPrecision p);

class Linear {
 public:
  Linear();
  ~Linear();
  Linear(Linear&&) noexcept;
  Linear& operator=(Linear&&) noexcept;

  // Builds from a GGUF tensor with ne = {in, out}. Throws Error(kUnsupported) for a tensor type
  // it cannot read. `data` must outlive the Linear when type is BF16 or block-quantized (read in
  // place).
  static Linear FromTensor(const format::TensorInfo& t);
  // Builds from float32 values W: [out, in] (tests, tools).
  static Linear FromF32(const float* w, size_t out, size_t in);

  size_t in() const;
  size_t out() const;
  // The storage type products read (BF16 for converted F32/F16 weights).
  format::TensorType storage_type() const;
  // Bytes this Linear allocated itself (converted weights); 0 when it reads the file in place.
  size_t owned_bytes() const;

  // y[n, out] = x[n, in] * W^T. x is float32 (converted to bf16 internally), y float32.
  // Thread count is oneDNN's (OpenMP, follows omp_set_num_threads).
  void Forward(const float* x, size_t n, float* y) const;

  struct Impl;  // defined in matmul.cpp

 private:
  std::unique_ptr<Impl> impl_;
};

// C[m, n] = A[m, k] * B[k, n] of bf16 operands with float32 accumulation and output (on the f32
// path the operands are widened first), through the same cached oneDNN primitives as Linear
// (attention's Q*K^T and P*V use it). A is row-major [m, k]; B is row-major [k, n], or stored as
// its transpose [n, k] when b_transposed; C is row-major [m, n]. Throws Error(kInternal) naming the
// shape when oneDNN fails.
void GemmBf16(const uint16_t* a, size_t m, size_t k, const uint16_t* b, size_t n, bool b_transposed,
              float* c);

// Block-quantized ggml types this project reads (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS); IsComputeType adds F32, F16 and BF16. ComputeTypeList names them.
bool IsBlockQuantized(format::TensorType type);
bool IsComputeType(format::TensorType type);
const char* ComputeTypeList();

// Dequantise n elements (n a multiple of the type's block size) of a stored tensor to float32,
// or to bf16 (rounded to nearest even; BF16 is copied). Every IsComputeType type; throws
// Error(kUnsupported) naming another type, Error(kInvalidArgument) for a partial block.
void DequantizeRow(format::TensorType type, const void* src, float* dst, size_t n);
void DequantizeRowBf16(format::TensorType type, const void* src, uint16_t* dst, size_t n);

// Plain oneDNN GEMM in the active precision, the benchmark yardstick: C[m,n] = A[m,k] * B[k,n].
// Returns achieved GFLOP/s over `iters` runs after one warm-up.
double MeasureGemmGflops(size_t m, size_t n, size_t k, int iters);

}  // namespace bicache::kernels
