// Many-row products on the stored integers for the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K):
// y[n, out] = x[n, in] * W^T above the few-row kernels' cut-over (kernels/linear_route.h).
//
// The arithmetic is the few-row kernels' (few_rows.h), so both routes give the same numbers: the
// activations are quantized once per product to int8 per 256 values (llama.cpp's Q8_K rule), a
// weight i of sub-block j (16 or 32 values) is w_i = d sc_j u_i - dm mw_j with small unsigned
// integers u, and per superblock, row and column
//   y += dx (d sum_j sc_j sum_{i in j} u_i q_i - dm sum_j mw_j s_j)
// where s_j is the sum of the activation quants of sub-block j (Q4_K/Q5_K/Q2_K: mw = the 4/6-bit
// min, dm = dmin; Q6_K/Q3_K: mw = 32 sc / 4 sc, dm = d). ref::FewRowsProduct (kernels/reference.h)
// is the scalar twin of both routes.
//
// Layout. Each thread packs a panel of weight rows (the output columns of one tile) from the mapped
// file, per 4 consecutive values of a superblock as [columns][4 bytes] of u, so one vector load
// holds 16 (AVX-512) or 8 (AVX2) columns x 4 values, to multiply with 4 activation quants
// broadcast to every lane. AVX512-VNNI: vpdpbusd gives each sub-block's dot exactly in int32, then
// it is converted and multiplied by sc_j in float (tiles of 6 rows x 32 columns). AVX2: the int16
// pair sums of vpmaddubsw add up over as many groups of 4 values as stay below 2^15 (8 for Q4_K's
// u < 16, 2 for Q6_K's u < 64), then vpmaddwd by sc_j into int32 (tiles of 2 rows x 16 columns).
// Both: the mins through the activations' sub-block sums (vpdpwssd / vpmaddwd), once per
// superblock. The panel is unpacked again for every product (nothing is kept beside the file;
// docs/benchmarks.md, "Many-row K-quant kernels", has what that costs and why).
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/tensor_type.h"
#include "kernels/few_rows.h"

namespace bicache::kernels {

// Whether KQuantTileForward takes W of this type with rows of `in` values: the K-quants, `in` a
// positive multiple of 256.
bool KQuantTileSupports(format::TensorType type, size_t in);

// y[n, out] = x[n, in] * W^T, W: [out, in] of `type` in rows `row_bytes` apart (the mapped file),
// with `isa`'s kernels (kAvx2: vpmaddubsw + vpmaddwd; kAvx512Vnni: 512-bit vpdpbusd).
// Parallel over panels of output columns (OpenMP). Throws Error(kUnsupported) when the CPU lacks
// `isa` or the type/width is not taken, Error(kInvalidArgument) for a row size that does not fit.
void KQuantTileForward(IntIsa isa, format::TensorType type, const float* x, size_t n, size_t in,
                       const uint8_t* w, size_t row_bytes, size_t out, float* y);

}  // namespace bicache::kernels
