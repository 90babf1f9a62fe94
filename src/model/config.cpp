#include "model/config.h"

#include <string>

namespace bicache::model {
namespace {

// Upper bounds that keep metadata from being used as an unchecked size (bug class 4): generous
// for any published model, small enough that products of them cannot overflow.
constexpr uint64_t kMaxLayers = 1024;
constexpr uint64_t kMaxDim = 1u << 17;
constexpr uint64_t kMaxHeads = 4096;
constexpr uint64_t kMaxContext = 1u << 24;
constexpr uint64_t kMaxExperts = 4096;

[[noreturn]] void Fail(const std::string& msg) {
  throw Error(ErrorKind::kModel, msg);
}

int ReadBounded(const format::GgufFile& f, const std::string& key, uint64_t lo, uint64_t hi) {
  uint64_t v = f.GetUInt(key);
  if (v < lo || v > hi) {
    Fail("metadata key '" + key + "' = " + std::to_string(v) + " is out of range [" +
         std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<int>(v);
}

// The expert keys of a mixture-of-experts architecture (as llama.cpp's converter writes them):
// expert_count, expert_used_count and expert_feed_forward_length (absent: d_ff / used, as
// llama.cpp reads it). One error per way the counts can be wrong.
void ReadExperts(const format::GgufFile& f, const std::string& p, ModelConfig* c) {
  const uint64_t n = f.GetUInt(p + "expert_count");
  if (n == 0)
    Fail("metadata key '" + p + "expert_count' is 0: a mixture-of-experts model needs experts");
  if (n > kMaxExperts) {
    Fail("metadata key '" + p + "expert_count' = " + std::to_string(n) + " exceeds " +
         std::to_string(kMaxExperts));
  }
  const uint64_t used = f.GetUInt(p + "expert_used_count");
  if (used == 0) Fail("metadata key '" + p + "expert_used_count' is 0: each token needs an expert");
  if (used > n) {
    Fail("metadata key '" + p + "expert_used_count' = " + std::to_string(used) +
         " exceeds expert_count = " + std::to_string(n));
  }
  c->n_expert = static_cast<int>(n);
  c->n_expert_used = static_cast<int>(used);
  if (f.Has(p + "expert_feed_forward_length")) {
    c->d_ff_exp = ReadBounded(f, p + "expert_feed_forward_length", 1, kMaxDim * 4);
  } else if (c->d_ff >= c->n_expert_used) {
    c->d_ff_exp = c->d_ff / c->n_expert_used;
  } else {
    Fail("metadata key '" + p + "expert_feed_forward_length' is missing (and no " + p +
         "feed_forward_length to derive it from)");
  }
  // No dense width given: the active expert width stands in for it (the benchmarks' GEMM
  // yardstick).
  if (c->d_ff == 0) c->d_ff = c->d_ff_exp * c->n_expert_used;
}

// The keys of llada2's BailingMoeV2 routing (llama.cpp's bailingmoe2 names): sigmoid gating,
// expert groups, the routed weights' scale and renormalisation, the shared expert(s) and the
// dense leading layers. One error per key that is missing or out of range.
void ReadBailingMoe(const format::GgufFile& f, const std::string& p, ModelConfig* c) {
  const std::string gating = p + "expert_gating_func";
  if (!f.Has(gating))
    Fail("metadata key '" + gating + "' is missing: " + ArchName(c->arch) +
         " routes with sigmoid scores (2)");
  if (const uint64_t g = f.GetUInt(gating); g != 2) {
    Fail("metadata key '" + gating + "' = " + std::to_string(g) + ": " + ArchName(c->arch) +
         " routes with sigmoid scores (2)");
  }
  const int E = c->n_expert;
  c->n_expert_group = f.Has(p + "expert_group_count")
                          ? ReadBounded(f, p + "expert_group_count", 1, static_cast<uint64_t>(E))
                          : 1;
  const int G = c->n_expert_group;
  if (E % G != 0) {
    Fail("metadata key '" + p + "expert_group_count' = " + std::to_string(G) +
         " does not divide expert_count = " + std::to_string(E));
  }
  if (G > 1 && E / G < 2) {
    Fail("metadata key '" + p + "expert_group_count' = " + std::to_string(G) +
         " leaves one expert per group; a group is scored by its two best experts");
  }
  c->n_expert_group_used = f.Has(p + "expert_group_used_count")
                               ? ReadBounded(f, p + "expert_group_used_count", 1, G)
                               : G;
  if (c->n_expert_used > c->n_expert_group_used * (E / G)) {
    Fail("metadata key '" + p + "expert_used_count' = " + std::to_string(c->n_expert_used) +
         " exceeds the " + std::to_string(c->n_expert_group_used * (E / G)) +
         " experts of the expert_group_used_count groups a token may use");
  }
  const double scale = f.GetFloatOr(p + "expert_weights_scale").value_or(1.0);
  if (!(scale > 0 && scale < 1e6))
    Fail("metadata key '" + p + "expert_weights_scale' must be in (0, 1e6)");
  c->expert_weights_scale = static_cast<float>(scale);
  c->expert_weights_norm = f.GetBoolOr(p + "expert_weights_norm").value_or(false);
  if (!f.Has(p + "expert_shared_count"))
    Fail("metadata key '" + p + "expert_shared_count' is missing: " + ArchName(c->arch) +
         " has a shared expert beside the routed ones");
  c->n_expert_shared = ReadBounded(f, p + "expert_shared_count", 1, kMaxExperts);
  c->d_ff_shexp = f.Has(p + "expert_shared_feed_forward_length")
                      ? ReadBounded(f, p + "expert_shared_feed_forward_length", 1, kMaxDim * 4)
                      : c->d_ff_exp * c->n_expert_shared;
  c->n_layer_dense_lead = f.Has(p + "leading_dense_block_count")
                              ? ReadBounded(f, p + "leading_dense_block_count", 0, c->n_layer)
                              : 0;
  if (c->n_layer_dense_lead > 0 && !f.Has(p + "feed_forward_length")) {
    Fail("metadata key '" + p + "feed_forward_length' is missing: the " +
         std::to_string(c->n_layer_dense_lead) + " leading dense layers need their width");
  }
  if (auto nextn = f.GetUIntOr(p + "nextn_predict_layers"); nextn && *nextn > 0) {
    throw Error(ErrorKind::kUnsupported, "metadata key '" + p +
                                             "nextn_predict_layers' = " + std::to_string(*nextn) +
                                             ": multi-token-prediction layers are not supported");
  }
}

// The RoPE width: rope.dimension_count when present, which must equal the head size unless the
// architecture turns only part of each head (llada2), else the head size.
int ReadRopeDim(const format::GgufFile& f, const std::string& p, const ArchTraits& t,
                int head_dim) {
  auto rope_dim = f.GetUIntOr(p + "rope.dimension_count");
  if (!rope_dim) return head_dim;
  if (*rope_dim == static_cast<uint64_t>(head_dim)) return head_dim;
  if (!t.partial_rope) {
    Fail("metadata key '" + p + "rope.dimension_count' = " + std::to_string(*rope_dim) +
         " differs from the head dimension " + std::to_string(head_dim) +
         " (partial RoPE is not supported)");
  }
  if (*rope_dim < 2 || *rope_dim > static_cast<uint64_t>(head_dim) || *rope_dim % 2 != 0) {
    Fail("metadata key '" + p + "rope.dimension_count' = " + std::to_string(*rope_dim) +
         " must be even and in [2, " + std::to_string(head_dim) + "] (the head dimension)");
  }
  return static_cast<int>(*rope_dim);
}

// attention.key_length when present (Qwen3 lineage: n_head * head_dim need not be d_model; the
// value length must then equal it), else d_model / n_head.
int ReadHeadDim(const format::GgufFile& f, const std::string& p, const ModelConfig& c) {
  if (f.Has(p + "attention.key_length")) {
    const int k = ReadBounded(f, p + "attention.key_length", 2, kMaxDim);
    if (auto v = f.GetUIntOr(p + "attention.value_length"); v && *v != static_cast<uint64_t>(k)) {
      Fail("metadata key '" + p + "attention.value_length' = " + std::to_string(*v) +
           " differs from attention.key_length = " + std::to_string(k));
    }
    return k;
  }
  if (c.d_model % c.n_head != 0) {
    Fail(p + "embedding_length (" + std::to_string(c.d_model) +
         ") is not a multiple of attention.head_count (" + std::to_string(c.n_head) + ")");
  }
  return c.d_model / c.n_head;
}

// diffusion.block_length (and sub_block_length) of a block-causal model: present, non-zero and
// dividing the context (so a whole context is whole blocks), the sub-block dividing the block.
void ReadBlocks(const format::GgufFile& f, const ArchTraits& t, ModelConfig* c) {
  const std::string key = "diffusion.block_length";
  if (!f.Has(key)) {
    Fail("metadata key '" + key + "' is missing: " + t.name +
         " is a block-diffusion model and needs its block length");
  }
  c->block_length = ReadBounded(f, key, 1, kMaxContext);
  if (c->context_length % c->block_length != 0) {
    Fail("metadata key '" + key + "' = " + std::to_string(c->block_length) +
         " does not divide the context length " + std::to_string(c->context_length));
  }
  if (!t.sub_blocks) return;
  const std::string sub = "diffusion.sub_block_length";
  if (!f.Has(sub)) {
    Fail("metadata key '" + sub + "' is missing: " + t.name + " denoises blocks in sub-blocks");
  }
  c->sub_block_length = ReadBounded(f, sub, 1, kMaxContext);
  if (c->block_length % c->sub_block_length != 0) {
    Fail("metadata key '" + sub + "' = " + std::to_string(c->sub_block_length) +
         " does not divide diffusion.block_length = " + std::to_string(c->block_length));
  }
}

}  // namespace

ModelConfig ReadConfig(const format::GgufFile& f) {
  ModelConfig c;
  const std::string arch = f.GetString("general.architecture");
  const ArchTraits* traits = FindArch(arch);
  if (!traits) {
    throw Error(ErrorKind::kUnsupported,
                "unsupported architecture '" + arch +
                    "' (general.architecture); supported: " + SupportedArchList());
  }
  c.arch = traits->arch;
  c.rope_layout = traits->rope_layout;
  c.qk_norm = traits->qk_norm;
  c.qkv_bias = traits->qkv_bias;
  c.expert_weights_norm = traits->router == RouterKind::kSoftmaxTopKRenorm;
  c.attention_mask = traits->mask;
  const std::string p = arch + ".";
  c.name = f.GetStringOr("general.name").value_or(arch);
  c.n_layer = ReadBounded(f, p + "block_count", 1, kMaxLayers);
  c.d_model = ReadBounded(f, p + "embedding_length", 2, kMaxDim);
  c.n_head = ReadBounded(f, p + "attention.head_count", 1, kMaxHeads);
  c.n_kv_head = f.Has(p + "attention.head_count_kv")
                    ? ReadBounded(f, p + "attention.head_count_kv", 1, kMaxHeads)
                    : c.n_head;
  const bool moe = traits->router != RouterKind::kDense;
  c.d_ff = !moe || f.Has(p + "feed_forward_length")
               ? ReadBounded(f, p + "feed_forward_length", 1, kMaxDim * 4)
               : 0;
  if (moe) ReadExperts(f, p, &c);
  if (traits->router == RouterKind::kSigmoidGroupTopK) ReadBailingMoe(f, p, &c);
  c.context_length = ReadBounded(f, p + "context_length", 1, kMaxContext);
  const double eps = f.GetFloat(p + "attention.layer_norm_rms_epsilon");
  if (!(eps > 0 && eps < 1))
    Fail("metadata key '" + p + "attention.layer_norm_rms_epsilon' must be in (0, 1)");
  c.rms_eps = static_cast<float>(eps);
  const double base = f.GetFloatOr(p + "rope.freq_base").value_or(10000.0);
  if (!(base > 1 && base < 1e12))
    Fail("metadata key '" + p + "rope.freq_base' must be in (1, 1e12)");
  c.rope_base = static_cast<float>(base);

  if (c.n_head % c.n_kv_head != 0) {
    Fail(p + "attention.head_count (" + std::to_string(c.n_head) +
         ") is not a multiple of attention.head_count_kv (" + std::to_string(c.n_kv_head) + ")");
  }
  c.head_dim = ReadHeadDim(f, p, c);
  if (c.head_dim % 2 != 0)
    Fail("head dimension " + std::to_string(c.head_dim) + " is odd; RoPE needs pairs");
  c.rope_dim = ReadRopeDim(f, p, *traits, c.head_dim);
  if (auto causal = f.GetBoolOr(p + "attention.causal"); causal && *causal) {
    throw Error(ErrorKind::kUnsupported,
                "metadata key '" + p +
                    "attention.causal' is true: bicache runs diffusion models (bidirectional or "
                    "block-causal), not causal ones");
  }
  // Absent: the architecture's default (shifted for Dream and RND1, as llama.cpp's diffusion-cli
  // does, and for Fast-dLLM v2's token shift).
  c.shift_logits = f.GetBoolOr("diffusion.shift_logits").value_or(traits->shift_logits);
  if (c.block_causal()) ReadBlocks(f, *traits, &c);
  auto mask = f.GetUIntOr("tokenizer.ggml.mask_token_id");
  if (!mask)
    Fail(
        "metadata key 'tokenizer.ggml.mask_token_id' is missing: a diffusion model needs a mask "
        "token");
  if (*mask > static_cast<uint64_t>(INT32_MAX))
    Fail("metadata key 'tokenizer.ggml.mask_token_id' is out of range");
  c.mask_token_id = static_cast<int32_t>(*mask);
  return c;
}

}  // namespace bicache::model
