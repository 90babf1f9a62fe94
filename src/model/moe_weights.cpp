// Loading the routed experts of a mixture-of-experts layer (model/moe.h).
#include <string>

#include "kernels/matmul.h"
#include "model/moe.h"
#include "util/error.h"

namespace bicache::model {
namespace {

[[noreturn]] void Fail(const std::string& msg) {
  throw Error(ErrorKind::kModel, msg);
}

const format::TensorInfo& Find(const format::GgufFile& f, const std::string& name) {
  const format::TensorInfo* t = f.FindTensor(name);
  if (!t) Fail("tensor '" + name + "' is missing");
  if (!kernels::IsComputeType(t->type)) {
    throw Error(ErrorKind::kUnsupported, "tensor '" + name + "' has type " +
                                             format::TensorTypeName(t->type) +
                                             "; supported: " + kernels::ComputeTypeList());
  }
  return *t;
}

// The router ffn_gate_inp: ne = {d, n_expert}, dequantized to float32 [n_expert, d] (routing in
// full precision, so a bf16 rounding never flips which experts a row takes).
std::vector<float> LoadRouter(const format::GgufFile& f, const std::string& name, uint64_t d,
                              uint64_t n_expert) {
  const format::TensorInfo& t = Find(f, name);
  if (t.ne.size() == 2 && t.ne[0] == d && t.ne[1] != n_expert) {
    Fail("tensor '" + name + "' routes to " + std::to_string(t.ne[1]) +
         " experts (its second dimension), but expert_count is " + std::to_string(n_expert));
  }
  if (t.ne != std::vector<uint64_t>{d, n_expert}) {
    Fail("tensor '" + name + "' has shape " + format::ShapeString(t.ne) + ", expected [" +
         std::to_string(d) + ", " + std::to_string(n_expert) + "]");
  }
  std::vector<float> w(d * n_expert);
  kernels::DequantizeRow(t.type, t.data, w.data(), w.size());
  return w;
}

// One Linear [out, in] per expert over the 3-D tensor ne = {in, out, n_expert}: expert e's
// matrix is the e-th contiguous slice, read in place where Linear reads its type in place.
std::vector<kernels::Linear> LoadExperts(const format::GgufFile& f, const std::string& name,
                                         uint64_t in, uint64_t out, uint64_t n_expert) {
  const format::TensorInfo& t = Find(f, name);
  if (t.ne.size() == 3 && t.ne[2] != n_expert) {
    Fail("tensor '" + name + "' holds " + std::to_string(t.ne[2]) +
         " experts (its third dimension), but expert_count is " + std::to_string(n_expert));
  }
  if (t.ne != std::vector<uint64_t>{in, out, n_expert}) {
    Fail("tensor '" + name + "' has shape " + format::ShapeString(t.ne) + ", expected [" +
         std::to_string(in) + ", " + std::to_string(out) + ", " + std::to_string(n_expert) + "]");
  }
  const uint64_t slice_bytes = t.n_bytes / n_expert;  // whole rows: blocks never span experts
  std::vector<kernels::Linear> experts;
  experts.reserve(n_expert);
  for (uint64_t e = 0; e < n_expert; ++e) {
    format::TensorInfo s;
    s.name = name + "[expert " + std::to_string(e) + "]";
    s.ne = {in, out};
    s.type = t.type;
    s.n_elements = in * out;
    s.n_bytes = slice_bytes;
    s.data = t.data + e * slice_bytes;
    experts.push_back(kernels::Linear::FromTensor(s));
  }
  return experts;
}

// A shared expert's matrix [out, in] (ne = {in, out}).
kernels::Linear LoadShared(const format::GgufFile& f, const std::string& name, uint64_t in,
                           uint64_t out) {
  const format::TensorInfo& t = Find(f, name);
  if (t.ne != std::vector<uint64_t>{in, out}) {
    Fail("tensor '" + name + "' has shape " + format::ShapeString(t.ne) + ", expected [" +
         std::to_string(in) + ", " + std::to_string(out) + "]");
  }
  return kernels::Linear::FromTensor(t);
}

}  // namespace

void LoadMoeFfn(const format::GgufFile& f, const ModelConfig& c, int layer, LayerWeights* w) {
  const uint64_t d = c.d_model, ff = c.d_ff_exp, n = c.n_expert;
  w->router = LoadRouter(f, TensorName(TensorId::kFfnGateInp, layer), d, n);
  w->exp_gate = LoadExperts(f, TensorName(TensorId::kFfnGateExps, layer), d, ff, n);
  w->exp_up = LoadExperts(f, TensorName(TensorId::kFfnUpExps, layer), d, ff, n);
  w->exp_down = LoadExperts(f, TensorName(TensorId::kFfnDownExps, layer), ff, d, n);
  const ArchTraits& t = c.traits();
  if (t.router_bias) {
    const std::string name = TensorName(TensorId::kFfnExpProbsB, layer);
    const format::TensorInfo* b = f.FindTensor(name);
    if (!b) {
      Fail("tensor '" + name + "' is missing: " + t.name +
           "'s router adds a per-expert bias to choose its experts");
    }
    if (b->ne != std::vector<uint64_t>{n}) {
      Fail("tensor '" + name + "' has shape " + format::ShapeString(b->ne) + ", expected [" +
           std::to_string(n) + "] (one bias per expert)");
    }
    Find(f, name);  // a type the engine reads
    w->router_bias.resize(n);
    kernels::DequantizeRow(b->type, b->data, w->router_bias.data(), n);
  }
  if (t.shared_experts) {
    const uint64_t sh = c.d_ff_shexp;
    w->shexp_gate = LoadShared(f, TensorName(TensorId::kFfnGateShexp, layer), d, sh);
    w->shexp_up = LoadShared(f, TensorName(TensorId::kFfnUpShexp, layer), d, sh);
    w->shexp_down = LoadShared(f, TensorName(TensorId::kFfnDownShexp, layer), sh, d);
  }
}

}  // namespace bicache::model
