#include "model/weights.h"

#include <string>

#include "model/moe.h"
#include "util/error.h"

namespace bicache::model {
namespace {

[[noreturn]] void Fail(const std::string& msg) {
  throw Error(ErrorKind::kModel, msg);
}

// Finds `name`, checks its shape (ne order) and that its type is one the engine computes with.
const format::TensorInfo& Require(const format::GgufFile& f, const std::string& name,
                                  std::vector<uint64_t> ne) {
  const format::TensorInfo* t = f.FindTensor(name);
  if (!t) Fail("tensor '" + name + "' is missing");
  if (t->ne != ne) {
    Fail("tensor '" + name + "' has shape " + format::ShapeString(t->ne) + ", expected " +
         format::ShapeString(ne));
  }
  if (!kernels::IsComputeType(t->type)) {
    throw Error(ErrorKind::kUnsupported, "tensor '" + name + "' has type " +
                                             format::TensorTypeName(t->type) +
                                             "; supported: " + kernels::ComputeTypeList());
  }
  return *t;
}

std::vector<float> LoadVector(const format::GgufFile& f, const std::string& name, uint64_t n) {
  const format::TensorInfo& t = Require(f, name, {n});
  std::vector<float> v(n);
  kernels::DequantizeRow(t.type, t.data, v.data(), n);
  return v;
}

kernels::Linear LoadLinear(const format::GgufFile& f, const std::string& name, uint64_t in,
                           uint64_t out) {
  return kernels::Linear::FromTensor(Require(f, name, {in, out}));
}

// A bias or per-head norm tensor the architecture requires (ArchTraits): missing, it is named
// together with the reason it is needed.
std::vector<float> LoadRequired(const format::GgufFile& f, const ModelConfig& c,
                                const std::string& name, uint64_t n, const char* why) {
  if (!f.FindTensor(name)) {
    Fail(std::string("tensor '") + name + "' is missing: " + ArchName(c.arch) + " " + why);
  }
  return LoadVector(f, name, n);
}

// Layer l's weights, named by the tensor table and required as the architecture's traits say.
void LoadLayer(const format::GgufFile& f, const ModelConfig& c, int l, LayerWeights* wp) {
  const uint64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), ff = c.d_ff;
  auto name = [l](TensorId id) { return TensorName(id, l); };
  constexpr const char* kBiasWhy = "has Q/K/V projection biases";
  LayerWeights& w = *wp;
  w.attn_norm = LoadVector(f, name(TensorId::kAttnNorm), d);
  if (f.FindTensor(name(TensorId::kAttnQkv))) {
    w.fused_qkv = true;
    w.wqkv = LoadLinear(f, name(TensorId::kAttnQkv), d, q + 2 * kv);
    if (c.qkv_bias) {
      std::vector<float> bias =
          LoadRequired(f, c, name(TensorId::kAttnQkvBias), q + 2 * kv, kBiasWhy);
      w.bq.assign(bias.begin(), bias.begin() + q);
      w.bk.assign(bias.begin() + q, bias.begin() + q + kv);
      w.bv.assign(bias.begin() + q + kv, bias.end());
    }
  } else {
    w.wq = LoadLinear(f, name(TensorId::kAttnQ), d, q);
    w.wk = LoadLinear(f, name(TensorId::kAttnK), d, kv);
    w.wv = LoadLinear(f, name(TensorId::kAttnV), d, kv);
    if (c.qkv_bias) {
      w.bq = LoadRequired(f, c, name(TensorId::kAttnQBias), q, kBiasWhy);
      w.bk = LoadRequired(f, c, name(TensorId::kAttnKBias), kv, kBiasWhy);
      w.bv = LoadRequired(f, c, name(TensorId::kAttnVBias), kv, kBiasWhy);
    }
  }
  w.wo = LoadLinear(f, name(TensorId::kAttnOutput), q, d);
  w.ffn_norm = LoadVector(f, name(TensorId::kFfnNorm), d);
  if (c.qk_norm) {
    constexpr const char* kWhy = "normalises Q and K per head";
    w.q_norm = LoadRequired(f, c, name(TensorId::kAttnQNorm), c.head_dim, kWhy);
    w.k_norm = LoadRequired(f, c, name(TensorId::kAttnKNorm), c.head_dim, kWhy);
  }
  if (c.LayerIsMoe(l)) {
    LoadMoeFfn(f, c, l, &w);
    return;
  }
  w.w_gate = LoadLinear(f, name(TensorId::kFfnGate), d, ff);
  w.w_up = LoadLinear(f, name(TensorId::kFfnUp), d, ff);
  w.w_down = LoadLinear(f, name(TensorId::kFfnDown), ff, d);
}

}  // namespace

std::unique_ptr<Model> Model::Load(const std::string& path, format::OpenOptions options) {
  return FromFile(format::GgufFile::Open(path, options));
}

std::unique_ptr<Model> Model::FromFile(format::GgufFile file) {
  return std::unique_ptr<Model>(new Model(std::move(file)));
}

Model::Model(format::GgufFile file) : file_(std::move(file)) {
  const format::GgufFile& f = file_;
  config_ = ReadConfig(f);
  ModelConfig& c = config_;
  const uint64_t d = c.d_model;

  const std::string embd_name = TensorName(TensorId::kTokenEmbd);
  token_embd_ = f.FindTensor(embd_name);
  if (!token_embd_) Fail("tensor '" + embd_name + "' is missing");
  if (token_embd_->ne.size() != 2 || token_embd_->ne[0] != d) {
    Fail("tensor '" + embd_name + "' has shape " + format::ShapeString(token_embd_->ne) +
         ", expected [" + std::to_string(d) + ", n_vocab]");
  }
  if (token_embd_->ne[1] > (1u << 24))
    Fail("tensor '" + embd_name + "' has an implausible vocabulary size");
  c.n_vocab = static_cast<int>(token_embd_->ne[1]);
  Require(f, embd_name, {d, static_cast<uint64_t>(c.n_vocab)});
  embd_row_bytes_ = token_embd_->n_bytes / c.n_vocab;
  const std::string arch = ArchName(c.arch);
  if (auto vs = f.GetUIntOr(arch + ".vocab_size"); vs && *vs != static_cast<uint64_t>(c.n_vocab)) {
    Fail("metadata key '" + arch + ".vocab_size' = " + std::to_string(*vs) +
         " differs from the embedding's " + std::to_string(c.n_vocab) + " rows");
  }
  if (c.mask_token_id >= c.n_vocab) {
    Fail("metadata key 'tokenizer.ggml.mask_token_id' = " + std::to_string(c.mask_token_id) +
         " is outside the vocabulary of " + std::to_string(c.n_vocab));
  }

  layers_.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) LoadLayer(f, c, l, &layers_[l]);
  output_norm_ = LoadVector(f, TensorName(TensorId::kOutputNorm), d);
  const uint64_t V = c.n_vocab;
  const std::string out_name = TensorName(TensorId::kOutput);
  output_ = f.FindTensor(out_name) ? LoadLinear(f, out_name, d, V) : LoadLinear(f, embd_name, d, V);
  for (const auto& t : f.tensors()) n_params_ += t.n_elements;
}

void Model::Embed(int32_t token, float* out) const {
  if (token < 0 || token >= config_.n_vocab) {
    throw Error(ErrorKind::kInvalidArgument, "token id " + std::to_string(token) +
                                                 " is outside the vocabulary of " +
                                                 std::to_string(config_.n_vocab));
  }
  kernels::DequantizeRow(token_embd_->type, token_embd_->data + token * embd_row_bytes_, out,
                         config_.d_model);
}

}  // namespace bicache::model
