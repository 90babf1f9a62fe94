#include "harness/synthetic_model.h"

#include <cmath>
#include <string>
#include <vector>

#include "format/quantize.h"
#include "util/error.h"

namespace bicache::harness {
namespace {

using format::TensorType;

// splitmix64: cheap, seedable, identical on every platform (std:: distributions are not).
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float Uniform() {
    return static_cast<float>(Next() >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f;
  }  // [-1, 1)
};

void Check(bool ok, const std::string& what) {
  if (!ok) throw Error(ErrorKind::kInvalidArgument, "synthetic model: " + what);
}

// Adds a matrix W: [out, in] (ne = {in, out}) with entries uniform in +-scale.
void AddMatrix(format::GgufWriter& w, Rng& rng, const std::string& name, TensorType type,
               uint64_t in, uint64_t out, float scale) {
  std::vector<float> v(in * out);
  for (float& x : v) x = rng.Uniform() * scale;
  w.AddTensor(name, type, {in, out}, format::EncodeTensor(type, v));
}

// A 3-D expert tensor: n_expert matrices [out, in] back to back (ne = {in, out, n_expert}).
void AddExperts(format::GgufWriter& w, Rng& rng, const std::string& name, TensorType type,
                uint64_t in, uint64_t out, uint64_t n_expert, float scale) {
  std::vector<float> v(in * out * n_expert);
  for (float& x : v) x = rng.Uniform() * scale;
  w.AddTensor(name, type, {in, out, n_expert}, format::EncodeTensor(type, v));
}

void AddOnes(format::GgufWriter& w, const std::string& name, uint64_t n) {
  const std::vector<float> v(n, 1.0f);
  w.AddTensorF32(name, {n}, v);
}

// Layer `b` ("blk.N."): attention, then a dense SwiGLU FFN or (s.n_expert > 0) router + experts.
void AddLayer(format::GgufWriter& w, Rng& rng, const SyntheticSpec& s, const std::string& b) {
  const uint64_t d = s.d_model, hd = d / s.n_head, q = d, kv = hd * s.n_kv_head;
  const TensorType t = s.matrix_type;
  const float sd = 1.0f / std::sqrt(static_cast<float>(d));
  AddOnes(w, b + "attn_norm.weight", d);
  AddMatrix(w, rng, b + "attn_q.weight", t, d, q, sd);
  AddMatrix(w, rng, b + "attn_k.weight", t, d, kv, sd);
  AddMatrix(w, rng, b + "attn_v.weight", t, d, kv, sd);
  AddMatrix(w, rng, b + "attn_output.weight", t, q, d, sd);
  AddOnes(w, b + "ffn_norm.weight", d);
  if (s.n_expert > 0) {
    const uint64_t ff = s.d_ff_exp, E = s.n_expert;
    const float sf = 1.0f / std::sqrt(static_cast<float>(ff));
    AddOnes(w, b + "attn_q_norm.weight", hd);
    AddOnes(w, b + "attn_k_norm.weight", hd);
    AddMatrix(w, rng, b + "ffn_gate_inp.weight", TensorType::F32, d, E, sd);
    AddExperts(w, rng, b + "ffn_gate_exps.weight", t, d, ff, E, sd);
    AddExperts(w, rng, b + "ffn_up_exps.weight", t, d, ff, E, sd);
    AddExperts(w, rng, b + "ffn_down_exps.weight", t, ff, d, E, sf);
    return;
  }
  const uint64_t ff = s.d_ff;
  const float sf = 1.0f / std::sqrt(static_cast<float>(ff));
  AddMatrix(w, rng, b + "ffn_gate.weight", t, d, ff, sd);
  AddMatrix(w, rng, b + "ffn_up.weight", t, d, ff, sd);
  AddMatrix(w, rng, b + "ffn_down.weight", t, ff, d, sf);
}

}  // namespace

std::unique_ptr<model::Model> MakeSyntheticLlada(const SyntheticSpec& s) {
  Check(s.d_model >= 2 && s.n_head >= 1 && s.n_kv_head >= 1 && s.d_ff >= 1 && s.n_layer >= 1 &&
            s.n_vocab >= 2 && s.context_length >= 1,
        "every size must be positive (d_model, n_vocab >= 2)");
  Check(s.d_model % s.n_head == 0, "d_model " + std::to_string(s.d_model) +
                                       " is not a multiple of n_head " + std::to_string(s.n_head));
  Check(s.n_head % s.n_kv_head == 0, "n_head is not a multiple of n_kv_head");
  Check((s.d_model / s.n_head) % 2 == 0, "head_dim must be even (RoPE)");
  uint64_t block = 1, block_bytes = 0;
  Check(format::TensorTypeLayout(s.matrix_type, &block, &block_bytes) &&
            format::CanEncode(s.matrix_type),
        "matrix type " + format::TensorTypeName(s.matrix_type) + " cannot be encoded");
  const bool quant = block > 1;
  const std::string blocks = "multiples of " + std::to_string(block);
  Check(!quant || (s.d_model % block == 0 && s.d_ff % block == 0),
        "quantised matrices need d_model and d_ff " + blocks);

  const bool moe = s.n_expert > 0;
  Check(!moe || (s.n_expert_used >= 1 && s.n_expert_used <= s.n_expert && s.d_ff_exp >= 1),
        "a mixture of experts needs 1 <= n_expert_used <= n_expert and d_ff_exp >= 1");
  Check(!quant || !moe || s.d_ff_exp % block == 0, "quantised experts need d_ff_exp " + blocks);

  const std::string arch = moe ? "llada-moe" : "llada", p = arch + ".";
  format::GgufWriter w;
  w.SetValue("general.architecture", format::Value::Str(arch));
  w.SetValue("general.name", format::Value::Str("synthetic-" + arch));
  w.SetValue(p + "block_count", format::Value::U32(s.n_layer));
  w.SetValue(p + "embedding_length", format::Value::U32(s.d_model));
  w.SetValue(p + "attention.head_count", format::Value::U32(s.n_head));
  w.SetValue(p + "attention.head_count_kv", format::Value::U32(s.n_kv_head));
  if (moe) {
    w.SetValue(p + "expert_count", format::Value::U32(s.n_expert));
    w.SetValue(p + "expert_used_count", format::Value::U32(s.n_expert_used));
    w.SetValue(p + "expert_feed_forward_length", format::Value::U32(s.d_ff_exp));
  } else {
    w.SetValue(p + "feed_forward_length", format::Value::U32(s.d_ff));
  }
  w.SetValue(p + "context_length", format::Value::U32(s.context_length));
  w.SetValue(p + "attention.layer_norm_rms_epsilon", format::Value::F32(1e-5f));
  w.SetValue(p + "rope.freq_base", format::Value::F32(10000.0f));
  w.SetValue("tokenizer.ggml.mask_token_id", format::Value::U32(s.n_vocab - 1));

  Rng rng{s.seed};
  const uint64_t d = s.d_model;
  AddMatrix(w, rng, "token_embd.weight", s.matrix_type, d, s.n_vocab, 1.0f);
  for (int l = 0; l < s.n_layer; ++l) AddLayer(w, rng, s, "blk." + std::to_string(l) + ".");
  AddOnes(w, "output_norm.weight", d);
  AddMatrix(w, rng, "output.weight", s.matrix_type, d, s.n_vocab,
            1.0f / std::sqrt(static_cast<float>(d)));

  const std::vector<uint8_t> bytes = w.ToBytes();
  return model::Model::FromFile(format::GgufFile::FromBytes(bytes));
}

}  // namespace bicache::harness
