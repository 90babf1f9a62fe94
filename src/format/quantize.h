// float32 -> ggml storage formats, one row (or any whole number of blocks) at a time.
//
// Block layouts are exactly ggml's (ggml-common.h), so files written with these encoders load in
// llama.cpp and in kernels::DequantizeRow. The quantisation algorithms are our own (per-sub-block
// range or absmax fits refined by least squares over a few candidate scales, then the 6/8-bit
// sub-block scales quantised and the quants recomputed against the stored scales); they are not
// bit-identical to llama.cpp's quantize_row_*, only valid and close to the input.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/gguf.h"

namespace bicache::format {

// True for the types EncodeRow (and EncodeTensor) can write: F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
bool CanEncode(TensorType type);
// "F32, F16, ..." (for error messages).
const char* EncodableTypeList();

// Encodes n floats into `dst`, which must hold (n / block elements) * block bytes bytes.
// Throws Error(kInvalidArgument) naming the count and block size if n is not a whole number of
// blocks, Error(kUnsupported) for a type CanEncode refuses. Thread-safe (no shared state).
void EncodeRow(TensorType type, const float* src, size_t n, uint8_t* dst);

// IEEE binary16 conversions (round to nearest even; subnormals, inf and NaN handled).
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t h);

namespace detail {
// One block each (32 or 256 input floats); used by EncodeRow.
void EncodeQ4_1Block(const float* x, uint8_t* out);  // 20 B
void EncodeQ5_0Block(const float* x, uint8_t* out);  // 22 B
void EncodeQ5_1Block(const float* x, uint8_t* out);  // 24 B
void EncodeQ4_KBlock(const float* x, uint8_t* out);  // 144 B
void EncodeQ5_KBlock(const float* x, uint8_t* out);  // 176 B
void EncodeQ6_KBlock(const float* x, uint8_t* out);  // 210 B
}  // namespace detail

}  // namespace bicache::format
