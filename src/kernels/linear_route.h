// Which kernel a Linear product runs, per (weight type, activation rows, instruction set): the one
// place the choice is made (Linear::Forward asks it for every product).
//
// Measured on a 2-core AMD EPYC (Zen 4: AVX-512 with VNNI and BF16, no AMX), LLaDA-8B width
// (docs/benchmarks.md, "Few-row kernels"):
//
// | weights                        | rows <= FewRowsCutover  | more rows |
// |--------------------------------|-------------------------|--------------------------------------|
// | BF16 (bf16 path), F32, F16     | oneDNN GEMM on W        | oneDNN GEMM on W | | BF16 on the f32
// path           | f32 panels + oneDNN     | f32 panels + oneDNN                  | | Q8_0,
// AVX512-VNNI, bf16 path   | few-row integer kernel  | Q8_0 int8 tile (int8_gemm.h)         | |
// other block types, AVX2 or VNNI| few-row integer kernel  | dequantized panels + oneDNN          |
// | block types, no AVX2 or off    | dequantized panels      | dequantized panels |
//
// "off": BICACHE_INT8=0 (every integer route; BICACHE_INT8=avx2 keeps the AVX2 kernels only, see
// few_rows.h). The f32 matmul path (BICACHE_MATMUL=f32, AVX2-only CPUs) runs the AVX2 kernels.
// BICACHE_FEW_ROWS=N replaces the cut-over (0 turns the few-row route off, so every product takes
// the route it took before that kernel existed; at most kFewRowsMax).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "format/gguf.h"
#include "kernels/few_rows.h"
#include "kernels/matmul.h"

namespace bicache::kernels {

enum class LinearRoute {
  kGemm,      // oneDNN on the weight matrix itself (BF16 read in place, or converted at load)
  kPanels,    // panels of rows dequantized to bf16 (f32 path: widened), then oneDNN per panel
  kInt8Tile,  // Q8_0 on AVX512-VNNI: packed panels, 4 x 32 vpdpbusd tiles (int8_gemm.h)
  kFewRows,   // few_rows.h: every superblock read once and applied to all rows
};
const char* LinearRouteName(LinearRoute r);

// The most activation rows the few-row kernel takes for `type` with `isa` (0: never): the table
// above, or BICACHE_FEW_ROWS.
size_t FewRowsCutover(format::TensorType type, IntIsa isa);
// BICACHE_FEW_ROWS's value: nullopt for "" / "auto", else a row count 0 .. kFewRowsMax; throws
// Error(kInvalidArgument) naming the variable for anything else.
std::optional<size_t> ParseFewRowsOverride(std::string_view value);

// The route of y[rows, out] = x[rows, in] * W^T for W stored as `type`; `in_place` says W is
// read from the file's blocks (block types, and BF16 on the f32 path) rather than held as one
// bf16/f32 matrix.
LinearRoute ChooseLinearRoute(format::TensorType type, bool in_place, size_t rows, size_t in,
                              MatmulPrecision precision, IntIsa isa);

}  // namespace bicache::kernels
