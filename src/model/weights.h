// A loaded model: configuration plus every weight, checked against it.
//
// Weight shapes below use PyTorch order [out, in]; the GGUF tensors have ne = {in, out}.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace bicache::model {

struct LayerWeights {
  std::vector<float> attn_norm;  // [d]
  kernels::Linear wq;            // [q_dim, d]   (absent when wqkv is used)
  kernels::Linear wk;            // [kv_dim, d]
  kernels::Linear wv;            // [kv_dim, d]
  kernels::Linear wqkv;          // [q_dim + 2 kv_dim, d]  Dream's fused form
  bool fused_qkv = false;
  std::vector<float> bq, bk, bv;  // Dream biases [q_dim], [kv_dim], [kv_dim]; empty for llada
  kernels::Linear wo;             // [d, q_dim]
  std::vector<float> ffn_norm;    // [d]
  kernels::Linear w_gate;         // [d_ff, d]
  kernels::Linear w_up;           // [d_ff, d]
  kernels::Linear w_down;         // [d, d_ff]
  // llada-moe: per-head Q/K norms and the routed experts (dense w_gate/w_up/w_down absent).
  std::vector<float> q_norm, k_norm;      // [head_dim]
  std::vector<float> router;              // [n_expert, d] ffn_gate_inp, float32
  std::vector<kernels::Linear> exp_gate;  // n_expert x [d_ff_exp, d]  slices of ffn_gate_exps
  std::vector<kernels::Linear> exp_up;    // n_expert x [d_ff_exp, d]  slices of ffn_up_exps
  std::vector<kernels::Linear> exp_down;  // n_expert x [d, d_ff_exp]  slices of ffn_down_exps
  // llada2: the router's choice bias and the shared expert(s), run on every row.
  std::vector<float> router_bias;  // [n_expert] exp_probs_b.bias, float32
  kernels::Linear shexp_gate;      // [d_ff_shexp, d]
  kernels::Linear shexp_up;        // [d_ff_shexp, d]
  kernels::Linear shexp_down;      // [d, d_ff_shexp]
};

class Model {
 public:
  // Opens, validates and prepares a model file. Throws bicache::Error naming what was wrong.
  static std::unique_ptr<Model> Load(const std::string& path, format::OpenOptions options = {});
  // Same from an already-open file (tests).
  static std::unique_ptr<Model> FromFile(format::GgufFile file);

  const ModelConfig& config() const { return config_; }
  const format::GgufFile& file() const { return file_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const kernels::Linear& output() const { return output_; }
  // Writes the embedding row of `token` (float32, [d]) into out. token must be < n_vocab.
  void Embed(int32_t token, float* out) const;
  // Total parameter count (elements of every tensor).
  uint64_t n_params() const { return n_params_; }

 private:
  explicit Model(format::GgufFile file);
  format::GgufFile file_;
  ModelConfig config_;
  const format::TensorInfo* token_embd_ = nullptr;  // [n_vocab, d]
  uint64_t embd_row_bytes_ = 0;
  std::vector<LayerWeights> layers_;
  std::vector<float> output_norm_;  // [d]
  kernels::Linear output_;          // [n_vocab, d] (tied to token_embd when output.weight absent)
  uint64_t n_params_ = 0;
};

}  // namespace bicache::model
