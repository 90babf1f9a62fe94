// A random-weight `llada` (or, with experts, `llada-moe`) model built in memory (no file on disk),
// for the forward benchmark and for tests that need a model of a given shape rather than a trained
// one.
//
// The model goes through the same path as a real file (GgufWriter -> bytes -> GgufFile ->
// model::Model), so loading, validation and zero-copy BF16 weights are exercised as in production.
// Weights are uniform in +-1/sqrt(fan_in) from a fixed seed, norms are 1: activations stay O(1)
// through the layers, so logits are finite but meaningless.
#pragma once

#include <cstdint>
#include <memory>

#include "format/gguf.h"
#include "model/weights.h"

namespace bicache::harness {

struct SyntheticSpec {
  int d_model = 1024;
  int n_head = 16;     // head_dim = d_model / n_head (64 by default)
  int n_kv_head = 16;  // < n_head for grouped-query attention
  int d_ff = 2816;
  int n_layer = 4;
  int n_vocab = 2048;
  int context_length = 4096;
  // Mixture of experts: n_expert > 0 writes a `llada-moe` model (per-head Q/K norms, an F32 router
  // ffn_gate_inp [d, n_expert], experts ffn_{gate,up,down}_exps with d_ff_exp rows each, top
  // n_expert_used per token); d_ff is then ignored. 0 = a dense `llada` model.
  int n_expert = 0;
  int n_expert_used = 0;
  int d_ff_exp = 0;
  // Storage type of the matrices (token embedding included): BF16 (zero-copy into oneDNN), F32,
  // F16, Q8_0 or Q4_0 (converted to bf16 at load). Norm vectors are always F32.
  format::TensorType matrix_type = format::TensorType::BF16;
  uint64_t seed = 1;
};

// Builds and loads the model. Throws bicache::Error(kInvalidArgument) for an inconsistent spec
// (e.g. d_model not a multiple of n_head) and whatever Model::FromFile throws otherwise.
// Cost: peak memory about 3 x the model's storage size while building (the writer's encoded
// tensors, the file image, and GgufFile::FromBytes' copy, which the model keeps); ~1 s per 100 MB.
std::unique_ptr<model::Model> MakeSyntheticLlada(const SyntheticSpec& spec);

}  // namespace bicache::harness
