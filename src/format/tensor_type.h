// Tensor types (ggml's values, as a GGUF file stores them) and the descriptor of one tensor's
// bytes: all that the kernels need to know of the file format (format/gguf.h is the reader).
//
// Dimension convention (as in ggml): `ne` lists dimensions fastest-varying first, so a PyTorch
// weight of shape [out, in] has ne = {in, out}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bicache::format {

// ggml tensor types (values as stored in the file).
enum class TensorType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

// Name ("F32", "Q8_0", ...) or "type#N" for unknown values.
std::string TensorTypeName(TensorType type);
// A tensor's dims (fastest first) for messages: "[64, 128]"; ShapeTimes: "64 x 128" (tables).
std::string ShapeString(const std::vector<uint64_t>& ne);
std::string ShapeTimes(const std::vector<uint64_t>& ne);
// Elements per block and bytes per block; false for a type this project cannot read.
bool TensorTypeLayout(TensorType type, uint64_t* block_elems, uint64_t* block_bytes);

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;  // fastest-varying first; 1..4 dims, each >= 1
  TensorType type = TensorType::F32;
  uint64_t offset = 0;            // relative to the data section (validated, aligned)
  uint64_t n_elements = 0;        // product of ne (checked for overflow)
  uint64_t n_bytes = 0;           // storage size (checked for overflow and against the file)
  const uint8_t* data = nullptr;  // points into the mapping
};

}  // namespace bicache::format
