// Per-architecture facts in one place: one traits record per `general.architecture`, and one table
// of GGUF tensor names (llama.cpp's names, shared by every architecture here). The config reader,
// the weight loaders and the requantizer read these instead of comparing architecture names or
// spelling tensor names themselves.
#pragma once

#include <string>
#include <string_view>

#include "kernels/ops.h"

namespace bicache::model {

enum class Arch { kLlada, kDream, kLladaMoe, kRnd1, kSdar, kFastDllmV2, kLlada2 };

// Which keys a token may attend to. kBlockCausal: position i sees j iff j / B <= i / B with B =
// diffusion.block_length (bidirectional inside a block, causal across blocks).
enum class AttentionMaskKind { kBidirectional, kBlockCausal };

// How the feed-forward is routed: a dense SwiGLU, or a softmax router over the experts whose
// top-k weights are used as routed (llada-moe) or renormalised to sum to 1 (rnd1), or
// BailingMoeV2's (llada2): sigmoid scores, a per-expert bias added for the choice only, the
// choice limited to the best expert groups, the chosen scores renormalised and scaled.
enum class RouterKind { kDense, kSoftmaxTopK, kSoftmaxTopKRenorm, kSigmoidGroupTopK };

struct ArchTraits {
  Arch arch;
  const char* name;                 // general.architecture
  kernels::RopeLayout rope_layout;  // llada normal (adjacent pairs), the Qwen lineage NEOX
  bool qkv_bias;                    // attn_{q,k,v}.bias (or attn_qkv.bias) required
  bool qk_norm;                     // per-head RMSNorm on Q and K: attn_{q,k}_norm required
  RouterKind router;                // dense or routed feed-forward
  bool shift_logits;                // default of diffusion.shift_logits: row i predicts i + 1
  AttentionMaskKind mask;           // attention mask kind
  bool sub_blocks;                  // diffusion.sub_block_length is read (fast-dllm-v2)
  bool partial_rope;                // rope.dimension_count may be below the head size (llada2)
  bool shared_experts;              // ffn_{gate,up,down}_shexp beside the routed experts
  bool router_bias;                 // exp_probs_b.bias: the router's per-expert choice bias
  // Every architecture normalises with RMSNorm (attn_norm, ffn_norm, output_norm) and runs a
  // SwiGLU feed-forward; a future LayerNorm or GELU model adds a field here.
};

// The traits of `arch`.
const ArchTraits& TraitsOf(Arch arch);
// The traits named `name` (general.architecture), or nullptr.
const ArchTraits* FindArch(std::string_view name);
// "llada, dream, ..." for error messages.
std::string SupportedArchList();
const char* ArchName(Arch arch);

// ---- tensor names ----
// Whole-model tensors, then per-layer ones (named "blk.N." + the table's suffix).
enum class TensorId {
  kTokenEmbd,
  kOutputNorm,
  kOutput,
  kAttnNorm,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnQkv,
  kAttnQBias,
  kAttnKBias,
  kAttnVBias,
  kAttnQkvBias,
  kAttnQNorm,
  kAttnKNorm,
  kAttnOutput,
  kFfnNorm,
  kFfnGate,
  kFfnUp,
  kFfnDown,
  kFfnGateInp,
  kFfnGateExps,
  kFfnUpExps,
  kFfnDownExps,
  kFfnExpProbsB,
  kFfnGateShexp,
  kFfnUpShexp,
  kFfnDownShexp,
};

// The name of a whole-model tensor ("token_embd.weight"), or its suffix for a per-layer one
// ("attn_q.weight").
const char* TensorSuffix(TensorId id);
// The full name: TensorSuffix for a whole-model tensor, "blk.<layer>." + suffix for a per-layer.
std::string TensorName(TensorId id, int layer = -1);

}  // namespace bicache::model
