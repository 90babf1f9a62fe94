// Model hyper-parameters read from GGUF metadata (architectures `llada`, `dream`, the
// mixture-of-experts `llada-moe` and `rnd1`, the block-diffusion `sdar` and `fast-dllm-v2`, and
// the block-diffusion mixture `llada2`; model/arch.h holds what each architecture implies).
#pragma once

#include <cstdint>
#include <string>

#include "format/gguf.h"
#include "kernels/ops.h"
#include "model/arch.h"

namespace bicache::model {

struct ModelConfig {
  Arch arch = Arch::kLlada;
  std::string name;            // general.name, or the architecture name
  int n_layer = 0;             // {arch}.block_count
  int d_model = 0;             // {arch}.embedding_length
  int n_head = 0;              // {arch}.attention.head_count
  int n_kv_head = 0;           // {arch}.attention.head_count_kv (default n_head)
  int head_dim = 0;            // {arch}.attention.key_length, else d_model / n_head
  int d_ff = 0;                // {arch}.feed_forward_length (MoE, absent: d_ff_exp * used)
  int n_vocab = 0;             // rows of token_embd
  int context_length = 0;      // {arch}.context_length
  float rms_eps = 1e-5f;       // {arch}.attention.layer_norm_rms_epsilon
  float rope_base = 10000.0f;  // {arch}.rope.freq_base
  int rope_dim = 0;  // {arch}.rope.dimension_count (default head_dim): RoPE turns the first
                     // rope_dim values of each head, the rest pass (llada2: head_dim / 2)
  kernels::RopeLayout rope_layout = kernels::RopeLayout::kNormal;  // llada normal, dream neox
  bool shift_logits = false;   // diffusion.shift_logits; absent: false for llada, true for dream
  int32_t mask_token_id = -1;  // tokenizer.ggml.mask_token_id (required)
  // Mixture of experts (llada-moe, rnd1); 0 experts = a dense model.
  int n_expert = 0;       // {arch}.expert_count
  int n_expert_used = 0;  // {arch}.expert_used_count (top-k per token)
  int d_ff_exp = 0;       // {arch}.expert_feed_forward_length (default d_ff / n_expert_used)
  bool expert_weights_norm =
      false;  // renormalise the chosen router weights (rnd1 yes, llada-moe no)
  // llada2 (BailingMoeV2): dense leading layers, grouped sigmoid routing, shared experts.
  int n_layer_dense_lead = 0;         // {arch}.leading_dense_block_count: layers < it are dense
  int n_expert_group = 1;             // {arch}.expert_group_count (divides n_expert)
  int n_expert_group_used = 1;        // {arch}.expert_group_used_count: groups a token may use
  float expert_weights_scale = 1.0f;  // {arch}.expert_weights_scale: scales the routed weights
  int n_expert_shared = 0;            // {arch}.expert_shared_count
  int d_ff_shexp = 0;                 // width of ffn_*_shexp (all shared experts together)
  bool qk_norm = false;               // per-head RMSNorm on Q and K before RoPE (attn_{q,k}_norm)
  bool qkv_bias = false;              // Q/K/V projections carry biases (dream, fast-dllm-v2)
  // Block diffusion (sdar, fast-dllm-v2): attention is block-causal over blocks of block_length
  // absolute positions; 0 with kBidirectional.
  AttentionMaskKind attention_mask = AttentionMaskKind::kBidirectional;
  int block_length = 0;      // diffusion.block_length (required for block-causal models)
  int sub_block_length = 0;  // diffusion.sub_block_length (fast-dllm-v2; divides block_length)

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_kv_head * head_dim; }
  bool is_moe() const { return n_expert > 0; }
  // Whether layer l's feed-forward is routed (llada2's leading layers are dense).
  bool LayerIsMoe(int l) const { return is_moe() && l >= n_layer_dense_lead; }
  bool block_causal() const { return attention_mask == AttentionMaskKind::kBlockCausal; }
  // The block a block-diffusion model denoises at a time: its sub-block (fast-dllm-v2) or its
  // block (sdar); 0 for a bidirectional model.
  int denoise_block() const {
    if (!block_causal()) return 0;
    return sub_block_length > 0 ? sub_block_length : block_length;
  }
  const ArchTraits& traits() const { return TraitsOf(arch); }
};

// Reads and validates the configuration. Throws Error(kUnsupported) for another architecture and
// Error(kModel) naming the key for a missing or out-of-range value. `n_vocab` is filled later
// from the embedding tensor by the weight loader.
ModelConfig ReadConfig(const format::GgufFile& file);

}  // namespace bicache::model
