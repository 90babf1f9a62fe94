// Which kernel a Linear product runs, per (weight type, activation rows, instruction set): the one
// place the choice is made (Linear::Forward asks it for every product).
//
// Measured on a 2-core AMD EPYC (Zen 4: AVX-512 with VNNI and BF16, no AMX) at LLaDA-8B's FFN
// input shape (W: [12288, 4096]; bench/kernels_bench.cpp BM_LinearByType, one thread, CPU time, ms;
// docs/benchmarks.md "Few-row kernels" has the whole table):
//
//   rows                     1      8     12     16     24     32
//   Q4_K few-row (VNNI)    3.6    9.5   18.1   22.0   28.6   32.7
//   Q4_K bf16 panels      12.4   23.5   24.7   26.9   30.3   29.1
//   Q8_0 few-row (VNNI)    2.8   10.7   24.4   28.8   38.4   50.2
//   Q8_0 int8 tile        12.1   11.8   13.0   13.9   14.7   16.2
//   Q4_K few-row (f32 path, AVX2)                19.2   29.4   35.5
//   Q4_K f32 panels                              40.3   44.9   50.6
//   BF16 few-row (vdpbf16ps)  5.5   18.5   20.9   27.2   43.3
//   BF16 oneDNN bf16 GEMM     5.0   16.2   18.3   20.1   25.0
//   BF16 few-row (f32 path)   7.8   18.4          38.8   56.4   82.0
//   BF16 f32 panels          14.1   24.3          44.3   49.4   55.7
//
// The K-quants' many-row integer tiles (kquant_tile.h) against their few-row kernels, same
// benchmark, one thread, CPU time in ms (docs/benchmarks.md, "Many-row K-quant kernels"):
//
//   rows                      8     12     16     24     32     64
//   Q4_K few-row (VNNI)     4.9    7.3   11.2   23.5   27.3   57.7
//   Q4_K tile (VNNI)        8.7    9.3    9.7   11.5   14.9   21.6
//   Q6_K few-row (VNNI)     5.5    8.5   13.3   23.8   29.7   62.3
//   Q6_K tile (VNNI)       10.4   10.6   11.4   16.9   19.2   23.0
//   Q4_K few-row (AVX2)                  15.6   26.5   34.8   71.8
//   Q4_K tile (AVX2)                     14.8   17.9   21.2   35.5
//   Q6_K few-row (AVX2)                  17.1   27.8   37.6   76.0
//   Q6_K tile (AVX2)                     18.0   21.3   25.0   39.5
//
// hence FewRowsCutover: the K-quants 12 rows on AVX512-VNNI and 16 with AVX2 (on either matmul
// path; Q5_K, Q2_K and Q3_K measured alike); Q8_0 where the int8 tile runs (AVX512-VNNI, bf16
// path): 8 rows; every other block type on the bf16 path: 16; on the f32 path (AVX2-only CPUs,
// whose oneDNN runs f32): 32; BF16 weights: 16 on the f32 path, none on the bf16 path (oneDNN's
// bf16 GEMM was as fast with one thread and with two). The routes, per weight type:
//
//  - BF16 (bf16 path), F32, F16: oneDNN's GEMM on W at every row count.
//  - BF16 on the f32 path: the bf16 few-row kernel up to the cut-over, then f32 panels + oneDNN.
//  - Q2_K .. Q6_K with AVX2 or AVX512-VNNI: the few-row kernel up to the cut-over, then the K-quant
//    integer tiles (kquant_tile.h).
//  - Q8_0 on AVX512-VNNI, bf16 path: the few-row kernel, then the Q8_0 int8 tile (int8_gemm.h).
//  - the other block types with AVX2 or AVX512-VNNI: the few-row kernel, then dequantized panels
//    + oneDNN.
//  - block types without AVX2 (or BICACHE_INT8=0): dequantized panels at every row count.
//
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "format/gguf.h"
#include "kernels/few_rows.h"
#include "kernels/matmul.h"

namespace bicache::kernels {

enum class LinearRoute {
  kGemm,        // oneDNN on the weight matrix itself (BF16 read in place, or converted at load)
  kPanels,      // panels of rows dequantized to bf16 (f32 path: widened), then oneDNN per panel
  kInt8Tile,    // Q8_0 on AVX512-VNNI: packed panels, 4 x 32 vpdpbusd tiles (int8_gemm.h)
  kFewRows,     // few_rows.h: every superblock read once and applied to all rows
  kKQuantTile,  // Q2_K .. Q6_K, AVX2 or AVX512-VNNI: packed panels, integer tiles (kquant_tile.h)
};
const char* LinearRouteName(LinearRoute r);

// The most activation rows the few-row kernel takes for `type` with `isa` on the `precision` path
// (0: never): the table above, or BICACHE_FEW_ROWS.
size_t FewRowsCutover(format::TensorType type, IntIsa isa, MatmulPrecision precision);
// BICACHE_FEW_ROWS's value: nullopt for "" / "auto", else a row count 0 .. kFewRowsMax; throws
// Error(kInvalidArgument) naming the variable for anything else.
std::optional<size_t> ParseFewRowsOverride(std::string_view value);

// The route of y[rows, out] = x[rows, in] * W^T for W stored as `type`; `in_place` says W is
// read from the file's blocks (block types, and BF16 on the f32 path) rather than held as one
// bf16/f32 matrix.
LinearRoute ChooseLinearRoute(format::TensorType type, bool in_place, size_t rows, size_t in,
                              MatmulPrecision precision, IntIsa isa);

}  // namespace bicache::kernels
