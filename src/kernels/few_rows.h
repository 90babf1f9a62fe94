// Few-row products on the stored integers: y[n, out] = x[n, in] * W^T for a block-quantized W and
// a handful of activation rows (the cached forwards of serving: 8-token blocks, a few requests).
//
// Each weight superblock (256 values: one K-quant block, or 8 blocks of a 32-value type) is read
// once from the mapped file (prefetched in software ahead of use), unpacked in registers to small
// unsigned integers u, and applied to every activation row before the next one is read; each
// OpenMP thread owns a contiguous range of output columns. The activations are quantized once per
// product to int8 (absmax / 127): per 256 values for the K-quants (llama.cpp's Q8_K rule), per 32
// for the other types (the Q8_0 route's rule, int8_gemm.h), so each sub-block's dot product is
// exact in int32. Per sub-block of 16 or 32 values with w = A u - B:
//   y += A dx sum(u q) - B dx sum(q)
// (dx the activation block's scale; dx sum(q) is computed once per product). K-quants: A = d sc
// with the integer sub-block scale sc applied in int32 (vpmaddubsw, then vpdpwssd on AVX512-VNNI
// or vpmaddwd on AVX2, by a vector of scales), so a row's whole superblock adds up in 8 int32
// lanes and costs one float multiply-add by d dx; lanes are summed once per output column. Other
// types (a float scale per 32): vpdpbusd (AVX512-VNNI) or vpmaddubsw + vpmaddwd (AVX2), a
// horizontal sum per block of 32, and a multiply-add by A dx. Both ISAs run 256-bit vectors (Zen 4
// runs 512-bit ones as two halves). Types whose quants are signed (Q8_0, IQ4_NL, IQ4_XS) use u = w
// + 128 with VNNI and the sign trick (|w| times x with w's sign) with AVX2. kernels/reference.h
// has the scalar twin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "format/gguf.h"

namespace bicache::kernels {

// Instruction sets of the integer routes, weakest first.
enum class IntIsa { kNone, kAvx2, kAvx512Vnni };
const char* IntIsaName(IntIsa isa);

// The best integer ISA of this CPU (cpuid, probed once).
IntIsa CpuIntIsa();
// BICACHE_INT8's value: nullopt for "" / "auto"; kNone for "0" / "off"; kAvx2 for "avx2" (caps
// the integer routes at AVX2 on a bigger CPU, to measure or test that path). Throws
// Error(kInvalidArgument) naming the variable for anything else.
std::optional<IntIsa> ParseIntIsaOverride(std::string_view value);
// The ISA the integer routes run with in this process (decided once): BICACHE_INT8 caps it; on the
// f32 matmul path (ActiveMatmulPrecision, the path of AVX2-only CPUs) it is at most kAvx2.
IntIsa ActiveIntIsa();

// Whether FewRowsForward takes W of this type with rows of `in` values (in a multiple of 256).
// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS.
bool FewRowsSupports(format::TensorType type, size_t in);
// Whether FewRowsForward quantizes the activations per 256 values for W of this type (the
// K-quants: Q2_K .. Q6_K, whose integer sub-block scales then apply in int32) rather than per 32.
bool FewRowsPer256(format::TensorType type);
// Rows of activations one product takes at most (larger n: call it in slices).
constexpr size_t kFewRowsMax = 64;

// y[n, out] = x[n, in] * W^T, W: [out, in] of `type` in rows `row_bytes` apart, computed with
// `isa`'s kernels (n <= kFewRowsMax). Throws Error(kUnsupported) when the CPU lacks `isa` or the
// type/width is not supported, Error(kInvalidArgument) for a bad shape.
void FewRowsForward(IntIsa isa, format::TensorType type, const float* x, size_t n, size_t in,
                    const uint8_t* w, size_t row_bytes, size_t out, float* y);

// BF16 weights at a few rows (few_rows_bf16.cpp): each weight row read once per 8 activation rows.
// Whether it runs with `isa`: kAvx2 (FMAs on widened values), or kAvx512Vnni on a CPU that also
// has AVX512-BF16 (vdpbf16ps).
bool FewRowsBf16Available(IntIsa isa);
// y[n, out] = x[n, in] * W^T for bf16 W: [out, in] (rows `in` values apart; may be the mapped
// file). kAvx512Vnni reads the activations rounded to bf16, xb (in a multiple of 32); kAvx2 the
// same values widened to float, xf (in a multiple of 8). Throws Error(kUnsupported) when
// !FewRowsBf16Available(isa), Error(kInvalidArgument) for another `in` or a missing operand.
void FewRowsBf16Forward(IntIsa isa, const uint16_t* xb, const float* xf, size_t n, size_t in,
                        const uint16_t* w, size_t out, float* y);

}  // namespace bicache::kernels
