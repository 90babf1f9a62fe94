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
  const uint64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), ff = c.d_ff;

  token_embd_ = f.FindTensor("token_embd.weight");
  if (!token_embd_) Fail("tensor 'token_embd.weight' is missing");
  if (token_embd_->ne.size() != 2 || token_embd_->ne[0] != d) {
    Fail("tensor 'token_embd.weight' has shape " + format::ShapeString(token_embd_->ne) +
         ", expected [" + std::to_string(d) + ", n_vocab]");
  }
  if (token_embd_->ne[1] > (1u << 24))
    Fail("tensor 'token_embd.weight' has an implausible vocabulary size");
  c.n_vocab = static_cast<int>(token_embd_->ne[1]);
  Require(f, "token_embd.weight", {d, static_cast<uint64_t>(c.n_vocab)});
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
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    LayerWeights& w = layers_[l];
    w.attn_norm = LoadVector(f, b + "attn_norm.weight", d);
    if (f.FindTensor(b + "attn_qkv.weight")) {
      w.fused_qkv = true;
      w.wqkv = LoadLinear(f, b + "attn_qkv.weight", d, q + 2 * kv);
      if (c.arch == Arch::kDream) {
        std::vector<float> bias = LoadVector(f, b + "attn_qkv.bias", q + 2 * kv);
        w.bq.assign(bias.begin(), bias.begin() + q);
        w.bk.assign(bias.begin() + q, bias.begin() + q + kv);
        w.bv.assign(bias.begin() + q + kv, bias.end());
      }
    } else {
      w.wq = LoadLinear(f, b + "attn_q.weight", d, q);
      w.wk = LoadLinear(f, b + "attn_k.weight", d, kv);
      w.wv = LoadLinear(f, b + "attn_v.weight", d, kv);
      if (c.arch == Arch::kDream) {
        w.bq = LoadVector(f, b + "attn_q.bias", q);
        w.bk = LoadVector(f, b + "attn_k.bias", kv);
        w.bv = LoadVector(f, b + "attn_v.bias", kv);
      }
    }
    w.wo = LoadLinear(f, b + "attn_output.weight", q, d);
    w.ffn_norm = LoadVector(f, b + "ffn_norm.weight", d);
    if (c.qk_norm) {
      w.q_norm = LoadVector(f, b + "attn_q_norm.weight", c.head_dim);
      w.k_norm = LoadVector(f, b + "attn_k_norm.weight", c.head_dim);
    }
    if (c.is_moe()) {
      LoadMoeFfn(f, c, b, &w);
      continue;
    }
    w.w_gate = LoadLinear(f, b + "ffn_gate.weight", d, ff);
    w.w_up = LoadLinear(f, b + "ffn_up.weight", d, ff);
    w.w_down = LoadLinear(f, b + "ffn_down.weight", ff, d);
  }
  output_norm_ = LoadVector(f, "output_norm.weight", d);
  const uint64_t V = c.n_vocab;
  output_ = f.FindTensor("output.weight") ? LoadLinear(f, "output.weight", d, V)
                                          : LoadLinear(f, "token_embd.weight", d, V);
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
