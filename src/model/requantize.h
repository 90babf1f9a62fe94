// Rewriting a GGUF model with its matrices quantised (the library side of `bicache quantize`).
//
// The target is a single ggml type (every quantisable matrix gets it, as llama-quantize --pure) or
// one of llama.cpp's K-quant recipes Q4_K_S / Q4_K_M / Q5_K_S / Q5_K_M, whose per-tensor rules are
// reproduced for the tensors our models have (requantize.cpp lists them). Source rows of any type
// the kernels read are dequantised to float32 and re-encoded, in parallel over rows; a tensor
// already of its target type is copied. Memory: the input is memory-mapped and the output written
// tensor by tensor, so at most one encoded tensor plus a row per thread is held. The file goes to
// OUTPUT.partial first and is renamed to OUTPUT when complete; a failure leaves neither behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace bicache::model {

// "Q8_0, Q4_0, ..., Q5_K_M": every target Requantize accepts.
std::string QuantizeTypeNames();

// One tensor as written.
struct RequantizedTensor {
  size_t index = 0;           // position in the file, 0-based
  std::string name;           //
  std::vector<uint64_t> ne;   // dims, fastest first
  format::TensorType from{};  // type in the input
  format::TensorType to{};    // type written
  // Its rows (ne[0]) are not a multiple of the block of `wanted`, the type the recipe chose, so it
  // fell back as llama.cpp does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0; else F16).
  bool fell_back = false;
  format::TensorType wanted{};
  uint64_t wanted_block = 0;  // elements per block of `wanted`
  uint64_t bytes_in = 0, bytes_out = 0;
};

// What Requantize is about to do, once the input is read and every tensor's type chosen.
struct RequantizeStart {
  std::string recipe;  // the target's canonical name ("Q4_K_M")
  size_t n_tensors = 0;
  int threads = 0;  // OpenMP team size the conversion runs with
};

struct RequantizeOptions {
  std::string input;   // source GGUF (F32, F16, BF16 or any type the kernels read)
  std::string output;  // GGUF to write; must not be the input
  std::string type;    // a name from QuantizeTypeNames(), any case
  // Progress, both optional: once before the first tensor, then after each tensor is converted.
  std::function<void(const RequantizeStart&)> on_start;
  std::function<void(const RequantizedTensor&)> on_tensor;
};

struct RequantizeReport {
  std::string recipe;                      // canonical name of the target
  uint32_t file_type = 0;                  // general.file_type written (llama.cpp's llama_ftype)
  std::vector<RequantizedTensor> tensors;  // every tensor, in file order
  uint64_t bytes_in = 0, bytes_out = 0;    // tensor data only
  double seconds = 0;                      // wall time, reading and writing included
};

// Writes options.output. FieldErrors naming {type}, {input} or {output} (the options' fields):
// kInvalidArgument for an unknown type or an output that is the input, kIo for an input that does
// not exist or an output that cannot be written. Error(kUnsupported) for a source tensor of a type
// that cannot be converted; the GGUF reader's own errors pass through.
RequantizeReport Requantize(const RequantizeOptions& options);

}  // namespace bicache::model
