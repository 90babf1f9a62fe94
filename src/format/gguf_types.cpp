// Names and block layouts of ggml tensor types and GGUF value types; Value helpers.
#include <string>

#include "format/gguf.h"
#include "format/gguf_internal.h"

namespace bicache::format {

std::string TensorTypeName(TensorType type) {
  switch (type) {
    case TensorType::F32:
      return "F32";
    case TensorType::F16:
      return "F16";
    case TensorType::Q4_0:
      return "Q4_0";
    case TensorType::Q4_1:
      return "Q4_1";
    case TensorType::Q5_0:
      return "Q5_0";
    case TensorType::Q5_1:
      return "Q5_1";
    case TensorType::Q8_0:
      return "Q8_0";
    case TensorType::Q8_1:
      return "Q8_1";
    case TensorType::Q2_K:
      return "Q2_K";
    case TensorType::Q3_K:
      return "Q3_K";
    case TensorType::Q4_K:
      return "Q4_K";
    case TensorType::Q5_K:
      return "Q5_K";
    case TensorType::Q6_K:
      return "Q6_K";
    case TensorType::Q8_K:
      return "Q8_K";
    case TensorType::IQ4_NL:
      return "IQ4_NL";
    case TensorType::IQ4_XS:
      return "IQ4_XS";
    case TensorType::I8:
      return "I8";
    case TensorType::I16:
      return "I16";
    case TensorType::I32:
      return "I32";
    case TensorType::I64:
      return "I64";
    case TensorType::F64:
      return "F64";
    case TensorType::BF16:
      return "BF16";
  }
  return "type#" + std::to_string(static_cast<uint32_t>(type));
}

bool TensorTypeLayout(TensorType type, uint64_t* block_elems, uint64_t* block_bytes) {
  uint64_t elems = 0, bytes = 0;
  switch (type) {
    case TensorType::F32:
      elems = 1;
      bytes = 4;
      break;
    case TensorType::F16:
      elems = 1;
      bytes = 2;
      break;
    case TensorType::BF16:
      elems = 1;
      bytes = 2;
      break;
    case TensorType::F64:
      elems = 1;
      bytes = 8;
      break;
    case TensorType::I8:
      elems = 1;
      bytes = 1;
      break;
    case TensorType::I16:
      elems = 1;
      bytes = 2;
      break;
    case TensorType::I32:
      elems = 1;
      bytes = 4;
      break;
    case TensorType::I64:
      elems = 1;
      bytes = 8;
      break;
    // 32-element blocks: f16 scale (and f16 min/sum for the _1 types) + packed quants.
    case TensorType::Q4_0:
      elems = 32;
      bytes = 18;
      break;  // d + 16 B nibbles
    case TensorType::Q4_1:
      elems = 32;
      bytes = 20;
      break;  // d, m + 16 B nibbles
    case TensorType::Q5_0:
      elems = 32;
      bytes = 22;
      break;  // d + 4 B high bits + 16 B
    case TensorType::Q5_1:
      elems = 32;
      bytes = 24;
      break;  // d, m + 4 B + 16 B
    case TensorType::Q8_0:
      elems = 32;
      bytes = 34;
      break;  // d + 32 int8
    case TensorType::Q8_1:
      elems = 32;
      bytes = 36;
      break;  // d, s + 32 int8
    // 256-element super-blocks (k-quants).
    case TensorType::Q2_K:
      elems = 256;
      bytes = 84;
      break;
    case TensorType::Q3_K:
      elems = 256;
      bytes = 110;
      break;
    case TensorType::Q4_K:
      elems = 256;
      bytes = 144;
      break;
    case TensorType::Q5_K:
      elems = 256;
      bytes = 176;
      break;
    case TensorType::Q6_K:
      elems = 256;
      bytes = 210;
      break;
    case TensorType::Q8_K:
      elems = 256;
      bytes = 292;
      break;  // f32 d + 256 int8 + 16 int16 sums
    // Non-linear 4-bit codebook (16 fixed levels): IQ4_NL per 32, IQ4_XS per 256 with 6-bit
    // sub-scales.
    case TensorType::IQ4_NL:
      elems = 32;
      bytes = 18;
      break;  // d + 16 B nibbles
    case TensorType::IQ4_XS:
      elems = 256;
      bytes = 136;
      break;  // d, scales_h, 4 B scales_l, 128 B
  }
  if (elems == 0) return false;
  if (block_elems) *block_elems = elems;
  if (block_bytes) *block_bytes = bytes;
  return true;
}

std::string ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::UINT8:
      return "UINT8";
    case ValueType::INT8:
      return "INT8";
    case ValueType::UINT16:
      return "UINT16";
    case ValueType::INT16:
      return "INT16";
    case ValueType::UINT32:
      return "UINT32";
    case ValueType::INT32:
      return "INT32";
    case ValueType::FLOAT32:
      return "FLOAT32";
    case ValueType::BOOL:
      return "BOOL";
    case ValueType::STRING:
      return "STRING";
    case ValueType::ARRAY:
      return "ARRAY";
    case ValueType::UINT64:
      return "UINT64";
    case ValueType::INT64:
      return "INT64";
    case ValueType::FLOAT64:
      return "FLOAT64";
  }
  return "type#" + std::to_string(static_cast<uint32_t>(type));
}

bool Value::is_integer() const {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

Value Value::U32(uint32_t v) {
  Value r;
  r.type = ValueType::UINT32;
  r.u = v;
  return r;
}
Value Value::I32(int32_t v) {
  Value r;
  r.type = ValueType::INT32;
  r.i = v;
  return r;
}
Value Value::U64(uint64_t v) {
  Value r;
  r.type = ValueType::UINT64;
  r.u = v;
  return r;
}
Value Value::F32(float v) {
  Value r;
  r.type = ValueType::FLOAT32;
  r.f = v;
  return r;
}
Value Value::Bool(bool v) {
  Value r;
  r.type = ValueType::BOOL;
  r.u = v ? 1 : 0;
  return r;
}
Value Value::Str(std::string v) {
  Value r;
  r.type = ValueType::STRING;
  r.s = std::move(v);
  return r;
}
Value Value::Array(ValueType elem_type, std::vector<Value> elems) {
  Value r;
  r.type = ValueType::ARRAY;
  r.elem_type = elem_type;
  r.elems = std::move(elems);
  return r;
}
Value Value::StrArray(const std::vector<std::string>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (const auto& s : v) elems.push_back(Str(s));
  return Array(ValueType::STRING, std::move(elems));
}
Value Value::I32Array(const std::vector<int32_t>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (int32_t x : v) elems.push_back(I32(x));
  return Array(ValueType::INT32, std::move(elems));
}
Value Value::F32Array(const std::vector<float>& v) {
  std::vector<Value> elems;
  elems.reserve(v.size());
  for (float x : v) elems.push_back(F32(x));
  return Array(ValueType::FLOAT32, std::move(elems));
}

namespace detail {

bool IsKnownValueType(uint32_t type) {
  return type <= static_cast<uint32_t>(ValueType::FLOAT64);
}

uint64_t MinValueBytes(ValueType type) {
  switch (type) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::BOOL:
      return 1;
    case ValueType::UINT16:
    case ValueType::INT16:
      return 2;
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::FLOAT32:
      return 4;
    case ValueType::UINT64:
    case ValueType::INT64:
    case ValueType::FLOAT64:
      return 8;
    case ValueType::STRING:
      return 8;  // u64 length
    case ValueType::ARRAY:
      return 12;  // u32 element type + u64 count
  }
  return 1;
}

bool IsGgmlTypeWithoutLayout(uint32_t type) {
  // 4, 5: removed Q4_2/Q4_3; 16-19, 21, 22: IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S;
  // 29: IQ1_M; 31-33: Q4_0_4_4/4_8/8_8; 34, 35: TQ1_0, TQ2_0; 36-38: IQ4_NL_4_4/4_8/8_8; 39: MXFP4.
  return type == 4 || type == 5 || (type >= 16 && type <= 19) || type == 21 || type == 22 ||
         type == 29 || (type >= 31 && type <= 39);
}

std::string GgmlTypeWithoutLayoutName(uint32_t type) {
  switch (type) {
    case 4:
      return "Q4_2 (removed from ggml)";
    case 5:
      return "Q4_3 (removed from ggml)";
    case 16:
      return "IQ2_XXS";
    case 17:
      return "IQ2_XS";
    case 18:
      return "IQ3_XXS";
    case 19:
      return "IQ1_S";
    case 21:
      return "IQ3_S";
    case 22:
      return "IQ2_S";
    case 29:
      return "IQ1_M";
    case 31:
      return "Q4_0_4_4";
    case 32:
      return "Q4_0_4_8";
    case 33:
      return "Q4_0_8_8";
    case 34:
      return "TQ1_0";
    case 35:
      return "TQ2_0";
    case 36:
      return "IQ4_NL_4_4";
    case 37:
      return "IQ4_NL_4_8";
    case 38:
      return "IQ4_NL_8_8";
    case 39:
      return "MXFP4";
  }
  return "type#" + std::to_string(type);
}

}  // namespace detail
std::string ShapeString(const std::vector<uint64_t>& ne) {
  std::string out = "[";
  for (size_t i = 0; i < ne.size(); ++i) out += (i ? ", " : "") + std::to_string(ne[i]);
  return out + "]";
}

std::string ShapeTimes(const std::vector<uint64_t>& ne) {
  std::string out;
  for (size_t i = 0; i < ne.size(); ++i) out += (i ? " x " : "") + std::to_string(ne[i]);
  return out;
}

}  // namespace bicache::format
