#include "model/arch.h"

#include <iterator>

namespace bicache::model {
namespace {

using kernels::RopeLayout;
constexpr auto kBidi = AttentionMaskKind::kBidirectional;
constexpr auto kBlock = AttentionMaskKind::kBlockCausal;

// One row per architecture. llada-moe: llama.cpp ropes it NEOX-style with Q/K normed per head;
// rnd1: Qwen3-MoE lineage; sdar: Qwen3 layout (Q/K norms, no bias); fast-dllm-v2: Qwen2.5 layout
// (Q/K/V biases). The Qwen-lineage diffusion models shift their logits (Dream, RND1 and Fast-dLLM
// v2's token shift); SDAR predicts each masked position from its own row. llada2: llama.cpp's
// bailingmoe2 layout (fused QKV, per-head Q/K norms, NEOX RoPE over the first half of each head,
// sigmoid router with expert bias and groups, one shared expert, dense leading layers), block-
// causal like SDAR and, like it, unshifted.
constexpr ArchTraits kTraits[] = {
    {.arch = Arch::kLlada,
     .name = "llada",
     .rope_layout = RopeLayout::kNormal,
     .qkv_bias = false,
     .qk_norm = false,
     .router = RouterKind::kDense,
     .shift_logits = false,
     .mask = kBidi,
     .sub_blocks = false,
     .partial_rope = false,
     .shared_experts = false,
     .router_bias = false},
    {.arch = Arch::kDream,
     .name = "dream",
     .rope_layout = RopeLayout::kNeox,
     .qkv_bias = true,
     .qk_norm = false,
     .router = RouterKind::kDense,
     .shift_logits = true,
     .mask = kBidi,
     .sub_blocks = false,
     .partial_rope = false,
     .shared_experts = false,
     .router_bias = false},
    {.arch = Arch::kLladaMoe,
     .name = "llada-moe",
     .rope_layout = RopeLayout::kNeox,
     .qkv_bias = false,
     .qk_norm = true,
     .router = RouterKind::kSoftmaxTopK,
     .shift_logits = false,
     .mask = kBidi,
     .sub_blocks = false,
     .partial_rope = false,
     .shared_experts = false,
     .router_bias = false},
    {.arch = Arch::kRnd1,
     .name = "rnd1",
     .rope_layout = RopeLayout::kNeox,
     .qkv_bias = false,
     .qk_norm = true,
     .router = RouterKind::kSoftmaxTopKRenorm,
     .shift_logits = true,
     .mask = kBidi,
     .sub_blocks = false,
     .partial_rope = false,
     .shared_experts = false,
     .router_bias = false},
    {.arch = Arch::kSdar,
     .name = "sdar",
     .rope_layout = RopeLayout::kNeox,
     .qkv_bias = false,
     .qk_norm = true,
     .router = RouterKind::kDense,
     .shift_logits = false,
     .mask = kBlock,
     .sub_blocks = false,
     .partial_rope = false,
     .shared_experts = false,
     .router_bias = false},
    {.arch = Arch::kFastDllmV2,
     .name = "fast-dllm-v2",
     .rope_layout = RopeLayout::kNeox,
     .qkv_bias = true,
     .qk_norm = false,
     .router = RouterKind::kDense,
     .shift_logits = true,
     .mask = kBlock,
     .sub_blocks = true,
     .partial_rope = false,
     .shared_experts = false,
     .router_bias = false},
    {.arch = Arch::kLlada2,
     .name = "llada2",
     .rope_layout = RopeLayout::kNeox,
     .qkv_bias = false,
     .qk_norm = true,
     .router = RouterKind::kSigmoidGroupTopK,
     .shift_logits = false,
     .mask = kBlock,
     .sub_blocks = false,
     .partial_rope = true,
     .shared_experts = true,
     .router_bias = true},
};

// Indexed by TensorId; per-layer entries are suffixes of "blk.N.".
constexpr const char* kTensorNames[] = {
    "token_embd.weight",     "output_norm.weight",  "output.weight",         "attn_norm.weight",
    "attn_q.weight",         "attn_k.weight",       "attn_v.weight",         "attn_qkv.weight",
    "attn_q.bias",           "attn_k.bias",         "attn_v.bias",           "attn_qkv.bias",
    "attn_q_norm.weight",    "attn_k_norm.weight",  "attn_output.weight",    "ffn_norm.weight",
    "ffn_gate.weight",       "ffn_up.weight",       "ffn_down.weight",       "ffn_gate_inp.weight",
    "ffn_gate_exps.weight",  "ffn_up_exps.weight",  "ffn_down_exps.weight",  "exp_probs_b.bias",
    "ffn_gate_shexp.weight", "ffn_up_shexp.weight", "ffn_down_shexp.weight",
};
static_assert(std::size(kTensorNames) == static_cast<size_t>(TensorId::kFfnDownShexp) + 1);
constexpr int kFirstLayerTensor = static_cast<int>(TensorId::kAttnNorm);

}  // namespace

const ArchTraits& TraitsOf(Arch arch) {
  for (const ArchTraits& t : kTraits) {
    if (t.arch == arch) return t;
  }
  return kTraits[0];  // unreachable: every Arch has a row (checked by the tests)
}

const ArchTraits* FindArch(std::string_view name) {
  for (const ArchTraits& t : kTraits) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

std::string SupportedArchList() {
  std::string s;
  for (const ArchTraits& t : kTraits) s += (s.empty() ? "" : ", ") + std::string(t.name);
  return s;
}

const char* ArchName(Arch arch) {
  return TraitsOf(arch).name;
}

const char* TensorSuffix(TensorId id) {
  return kTensorNames[static_cast<int>(id)];
}

std::string TensorName(TensorId id, int layer) {
  if (static_cast<int>(id) < kFirstLayerTensor) return TensorSuffix(id);
  return "blk." + std::to_string(layer) + "." + TensorSuffix(id);
}

}  // namespace bicache::model
