// Structure-aware GGUF fuzzing. A whole-file fuzzer rarely gets past the first length field, so
// this target starts from a valid model file built in memory with GgufWriter (a 2-layer llada
// with the golden tokenizer's metadata, several tensor types) and lets the fuzz input choose
// which fields to overwrite and with what: the header counts, string lengths, value types, array
// element types and lengths, tensor dimension counts, dimensions, types and offsets, integer and
// float metadata values (the model configuration), and where the file ends. Every input is also
// applied to a second base, a 1-layer llada-moe (expert counts, Q/K norms, router, 3-D experts),
// so the mixture-of-experts keys and shapes are mutated too, and to a third, a 1-layer
// fast-dllm-v2 (block-diffusion keys diffusion.block_length / sub_block_length, Q/K/V biases,
// block-causal attention).
//
// Input format (all little-endian, read until the input runs out), one mutation per record:
//   u8 op, u16 field index (modulo the fields of that kind), u8 value selector, [u64 raw value]
#include <cstring>
#include <string>
#include <vector>

#include "fixtures.h"
#include "model/weights.h"
#include "targets.h"
#include "util/error.h"

namespace bicache::fuzz {
namespace {

using format::TensorType;
using format::Value;
using format::ValueType;

enum FieldKind {
  kCount,         // tensor_count, kv_count (u64)
  kStringLength,  // every string's u64 length (keys, string values, tensor names)
  kValueType,     // a metadata entry's u32 value type
  kElemType,      // an array's u32 element type
  kArrayLength,   // an array's u64 length
  kNDims,         // a tensor's u32 dimension count
  kDim,           // a tensor dimension (u64)
  kTensorType,    // a tensor's u32 ggml type
  kTensorOffset,  // a tensor's u64 data offset
  kScalar,        // a scalar metadata value (1, 2, 4 or 8 bytes)
  kNumKinds,
};

struct Field {
  size_t pos;
  int width;
};

// Byte positions of every field of a *valid* GGUF image, by kind.
class FieldMap {
 public:
  explicit FieldMap(const std::vector<uint8_t>& b) : b_(b) {
    Add(kCount, 8, 8);
    Add(kCount, 16, 8);
    const uint64_t n_tensors = U64(8), n_kv = U64(16);
    pos_ = 24;
    for (uint64_t i = 0; i < n_kv; ++i) {
      String();
      Add(kValueType, pos_, 4);
      const uint32_t type = U32(pos_);
      pos_ += 4;
      Value(type);
    }
    for (uint64_t i = 0; i < n_tensors; ++i) {
      String();
      Add(kNDims, pos_, 4);
      const uint32_t n_dims = U32(pos_);
      pos_ += 4;
      for (uint32_t d = 0; d < n_dims; ++d, pos_ += 8) Add(kDim, pos_, 8);
      Add(kTensorType, pos_, 4);
      pos_ += 4;
      Add(kTensorOffset, pos_, 8);
      pos_ += 8;
    }
  }
  const std::vector<Field>& of(int kind) const { return fields_[kind]; }

 private:
  uint32_t U32(size_t at) const {
    uint32_t v;
    std::memcpy(&v, b_.data() + at, 4);
    return v;
  }
  uint64_t U64(size_t at) const {
    uint64_t v;
    std::memcpy(&v, b_.data() + at, 8);
    return v;
  }
  void Add(int kind, size_t pos, int width) { fields_[kind].push_back({pos, width}); }
  void String() {
    Add(kStringLength, pos_, 8);
    pos_ += 8 + U64(pos_);
  }
  void Value(uint32_t type) {
    static constexpr int kWidth[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    switch (static_cast<ValueType>(type)) {
      case ValueType::STRING:
        String();
        return;
      case ValueType::ARRAY: {
        Add(kElemType, pos_, 4);
        const uint32_t elem = U32(pos_);
        Add(kArrayLength, pos_ + 4, 8);
        const uint64_t n = U64(pos_ + 4);
        pos_ += 12;
        for (uint64_t i = 0; i < n; ++i) Value(elem);
        return;
      }
      default:
        Add(kScalar, pos_, kWidth[type]);
        pos_ += kWidth[type];
    }
  }

  const std::vector<uint8_t>& b_;
  size_t pos_ = 0;
  std::vector<Field> fields_[kNumKinds];
};

std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 101) / 101.0f - 0.5f;
  return v;
}

// d_model 32, 2 heads (head_dim 16) over 1 kv head, d_ff 64, 2 layers, the golden 300-token
// vocabulary. Layer 0 mixes F32/F16 and the 32-element block types Q8_0, Q5_0, Q4_1, Q5_1, layer 1
// is BF16 with a fused QKV, the output head Q4_0 (a type mutation reaches the 256-element K-quants,
// whose rows these widths cannot fill: an error naming the tensor).
std::vector<uint8_t> BuildBase() {
  const int d = 32, ff = 64, head_dim = 16, kv = head_dim, n_vocab = 300;
  format::GgufWriter w;
  w.SetValue("general.architecture", Value::Str("llada"));
  w.SetValue("general.name", Value::Str("fuzz-base"));
  w.SetValue("llada.block_count", Value::U32(2));
  w.SetValue("llada.embedding_length", Value::U32(d));
  w.SetValue("llada.attention.head_count", Value::U32(2));
  w.SetValue("llada.attention.head_count_kv", Value::U32(1));
  w.SetValue("llada.feed_forward_length", Value::U32(ff));
  w.SetValue("llada.context_length", Value::U32(64));
  w.SetValue("llada.attention.layer_norm_rms_epsilon", Value::F32(1e-5f));
  w.SetValue("llada.rope.freq_base", Value::F32(10000.0f));
  w.SetValue("llada.rope.dimension_count", Value::U32(head_dim));
  w.SetValue("llada.vocab_size", Value::U32(n_vocab));
  w.SetValue("llada.attention.causal", Value::Bool(false));
  for (const auto& [key, value] : GoldenLlada().model().file().metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.SetValue(key, value);
  }
  auto add = [&](const std::string& name, TensorType type, uint64_t in, uint64_t out) {
    w.AddTensor(name, type, {in, out}, format::EncodeTensor(type, Ramp(in * out)));
  };
  auto norm = [&](const std::string& name) {
    std::vector<float> ones(d, 1.0f);
    w.AddTensorF32(name, {static_cast<uint64_t>(d)}, ones);
  };
  add("token_embd.weight", TensorType::F16, d, n_vocab);
  norm("blk.0.attn_norm.weight");
  add("blk.0.attn_q.weight", TensorType::Q8_0, d, d);
  add("blk.0.attn_k.weight", TensorType::Q5_0, d, kv);
  add("blk.0.attn_v.weight", TensorType::Q4_1, d, kv);
  add("blk.0.attn_output.weight", TensorType::F32, d, d);
  norm("blk.0.ffn_norm.weight");
  add("blk.0.ffn_gate.weight", TensorType::Q8_0, d, ff);
  add("blk.0.ffn_up.weight", TensorType::F16, d, ff);
  add("blk.0.ffn_down.weight", TensorType::Q5_1, ff, d);
  norm("blk.1.attn_norm.weight");
  add("blk.1.attn_qkv.weight", TensorType::BF16, d, d + 2 * kv);
  add("blk.1.attn_output.weight", TensorType::BF16, d, d);
  norm("blk.1.ffn_norm.weight");
  add("blk.1.ffn_gate.weight", TensorType::BF16, d, ff);
  add("blk.1.ffn_up.weight", TensorType::BF16, d, ff);
  add("blk.1.ffn_down.weight", TensorType::BF16, ff, d);
  norm("output_norm.weight");
  add("output.weight", TensorType::Q4_0, d, n_vocab);
  return w.ToBytes();
}

// d_model 32, 2 heads of 16 over 1 kv head, 1 layer of 4 experts (top 2, expert d_ff 32): router
// F32, gate experts Q8_0, up F16, down BF16 (3-D tensors), per-head Q/K norms; tied output.
std::vector<uint8_t> BuildMoeBase() {
  const uint64_t d = 32, hd = 16, ff = 32, n_expert = 4, n_vocab = 300;
  format::GgufWriter w;
  for (const auto& [key, value] : GoldenLlada().model().file().metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.SetValue(key, value);
  }
  const std::string a = "llada-moe.";
  w.SetValue("general.architecture", Value::Str("llada-moe"));
  w.SetValue(a + "block_count", Value::U32(1));
  w.SetValue(a + "embedding_length", Value::U32(d));
  w.SetValue(a + "attention.head_count", Value::U32(2));
  w.SetValue(a + "attention.head_count_kv", Value::U32(1));
  w.SetValue(a + "expert_count", Value::U32(n_expert));
  w.SetValue(a + "expert_used_count", Value::U32(2));
  w.SetValue(a + "expert_feed_forward_length", Value::U32(ff));
  w.SetValue(a + "context_length", Value::U32(64));
  w.SetValue(a + "attention.layer_norm_rms_epsilon", Value::F32(1e-5f));
  w.SetValue(a + "rope.freq_base", Value::F32(10000.0f));
  w.SetValue(a + "attention.causal", Value::Bool(false));
  auto add = [&](const std::string& name, TensorType type, std::vector<uint64_t> ne) {
    uint64_t n = 1;
    for (uint64_t v : ne) n *= v;
    w.AddTensor(name, type, ne, format::EncodeTensor(type, Ramp(n)));
  };
  add("token_embd.weight", TensorType::F16, {d, n_vocab});
  add("blk.0.attn_norm.weight", TensorType::F32, {d});
  add("blk.0.attn_q.weight", TensorType::F32, {d, d});
  add("blk.0.attn_k.weight", TensorType::F16, {d, hd});
  add("blk.0.attn_v.weight", TensorType::BF16, {d, hd});
  add("blk.0.attn_q_norm.weight", TensorType::F32, {hd});
  add("blk.0.attn_k_norm.weight", TensorType::F32, {hd});
  add("blk.0.attn_output.weight", TensorType::Q8_0, {d, d});
  add("blk.0.ffn_norm.weight", TensorType::F32, {d});
  add("blk.0.ffn_gate_inp.weight", TensorType::F32, {d, n_expert});
  add("blk.0.ffn_gate_exps.weight", TensorType::Q8_0, {d, ff, n_expert});
  add("blk.0.ffn_up_exps.weight", TensorType::F16, {d, ff, n_expert});
  add("blk.0.ffn_down_exps.weight", TensorType::BF16, {ff, d, n_expert});
  add("output_norm.weight", TensorType::F32, {d});
  return w.ToBytes();
}

// d_model 32, 2 heads of 16 over 1 kv head, d_ff 64, 1 layer of the block-diffusion
// fast-dllm-v2: Q/K/V biases, blocks of 8 in sub-blocks of 4 over a context of 64; tied output.
std::vector<uint8_t> BuildBlockBase() {
  const uint64_t d = 32, hd = 16, ff = 64, n_vocab = 300;
  format::GgufWriter w;
  for (const auto& [key, value] : GoldenLlada().model().file().metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.SetValue(key, value);
  }
  const std::string a = "fast-dllm-v2.";
  w.SetValue("general.architecture", Value::Str("fast-dllm-v2"));
  w.SetValue(a + "block_count", Value::U32(1));
  w.SetValue(a + "embedding_length", Value::U32(d));
  w.SetValue(a + "attention.head_count", Value::U32(2));
  w.SetValue(a + "attention.head_count_kv", Value::U32(1));
  w.SetValue(a + "feed_forward_length", Value::U32(ff));
  w.SetValue(a + "context_length", Value::U32(64));
  w.SetValue(a + "attention.layer_norm_rms_epsilon", Value::F32(1e-6f));
  w.SetValue(a + "rope.freq_base", Value::F32(1000000.0f));
  w.SetValue("diffusion.block_length", Value::U32(8));
  w.SetValue("diffusion.sub_block_length", Value::U32(4));
  auto add = [&](const std::string& name, TensorType type, std::vector<uint64_t> ne) {
    uint64_t n = 1;
    for (uint64_t v : ne) n *= v;
    w.AddTensor(name, type, ne, format::EncodeTensor(type, Ramp(n)));
  };
  add("token_embd.weight", TensorType::Q8_0, {d, n_vocab});
  add("blk.0.attn_norm.weight", TensorType::F32, {d});
  add("blk.0.attn_q.weight", TensorType::BF16, {d, d});
  add("blk.0.attn_k.weight", TensorType::F16, {d, hd});
  add("blk.0.attn_v.weight", TensorType::F32, {d, hd});
  add("blk.0.attn_q.bias", TensorType::F32, {d});
  add("blk.0.attn_k.bias", TensorType::F32, {hd});
  add("blk.0.attn_v.bias", TensorType::F32, {hd});
  add("blk.0.attn_output.weight", TensorType::Q8_0, {d, d});
  add("blk.0.ffn_norm.weight", TensorType::F32, {d});
  add("blk.0.ffn_gate.weight", TensorType::BF16, {d, ff});
  add("blk.0.ffn_up.weight", TensorType::Q4_0, {d, ff});
  add("blk.0.ffn_down.weight", TensorType::F16, {ff, d});
  add("output_norm.weight", TensorType::F32, {d});
  std::vector<uint8_t> bytes = w.ToBytes();
  // Unmutated, it must load, or its mutations would never reach the block-causal forward.
  bool loads = false;
  try {
    loads = model::Model::FromFile(format::GgufFile::FromBytes(bytes))->config().block_causal();
  } catch (const Error&) {
  }
  BICACHE_FUZZ_CHECK(loads, "the fast-dllm-v2 base file does not load as a block-causal model");
  return bytes;
}

class Reader {
 public:
  explicit Reader(Input in) : in_(in) {}
  bool empty() const { return pos_ >= in_.size(); }
  uint64_t Bytes(int n) {  // little-endian; zero-filled past the end
    uint64_t v = 0;
    for (int i = 0; i < n; ++i, ++pos_) {
      if (pos_ < in_.size()) v |= static_cast<uint64_t>(in_[pos_]) << (8 * i);
    }
    return v;
  }

 private:
  Input in_;
  size_t pos_ = 0;
};

// Values that sit on the edges parsers get wrong.
uint64_t Pick(Reader* r, uint64_t old, size_t file_size) {
  const uint8_t sel = static_cast<uint8_t>(r->Bytes(1));
  switch (sel % 16) {
    case 0:
      return 0;
    case 1:
      return 1;
    case 2:
      return old + 1;
    case 3:
      return old - 1;
    case 4:
      return old * 2;
    case 5:
      return old + 32;
    case 6:
      return 0xFFFFFFFFull;
    case 7:
      return 0x100000000ull;
    case 8:
      return uint64_t{1} << 63;
    case 9:
      return ~uint64_t{0};
    case 10:
      return file_size;
    case 11:
      return file_size - 1;
    case 12:
      return sel >> 4;  // small: types, dim counts
    case 13:
      return static_cast<uint64_t>(INT64_MAX);
    default:
      return r->Bytes(8);
  }
}

}  // namespace

namespace {

// Applies the input's mutations to `base` and runs the result through the parse/model path.
void MutateAndExercise(const std::vector<uint8_t>& base, const FieldMap& fields, Input in) {
  std::vector<uint8_t> bytes = base;
  Reader r(in);
  for (int n = 0; !r.empty() && n < 64; ++n) {
    const uint8_t op = static_cast<uint8_t>(r.Bytes(1));
    const uint16_t index = static_cast<uint16_t>(r.Bytes(2));
    if (op % (kNumKinds + 2) == kNumKinds) {  // truncate
      bytes.resize(std::min<uint64_t>(bytes.size(), Pick(&r, bytes.size(), bytes.size())));
      continue;
    }
    if (op % (kNumKinds + 2) == kNumKinds + 1) {  // append garbage
      bytes.resize(bytes.size() + index % 4096, static_cast<uint8_t>(index >> 12));
      continue;
    }
    const std::vector<Field>& of = fields.of(op % (kNumKinds + 2));
    if (of.empty()) continue;
    const Field f = of[index % of.size()];
    if (f.pos + f.width > bytes.size()) continue;  // truncated away
    uint64_t old = 0;
    std::memcpy(&old, bytes.data() + f.pos, f.width);
    const uint64_t v = Pick(&r, old, bytes.size());
    std::memcpy(bytes.data() + f.pos, &v, f.width);  // little-endian: low bytes
  }
  try {
    ExerciseParsedFile(format::GgufFile::FromBytes(bytes));
  } catch (const Error&) {
  }
}

}  // namespace

void GgufStructured(Input in) {
  static const std::vector<uint8_t> base = BuildBase();
  static const FieldMap fields(base);
  static const std::vector<uint8_t> moe_base = BuildMoeBase();
  static const FieldMap moe_fields(moe_base);
  MutateAndExercise(base, fields, in);
  MutateAndExercise(moe_base, moe_fields, in);
  static const std::vector<uint8_t> block_base = BuildBlockBase();
  static const FieldMap block_fields(block_base);
  MutateAndExercise(block_base, block_fields, in);
}

}  // namespace bicache::fuzz
