// Typed metadata getters. A wrong type or an out-of-range value is a model error (the file
// itself parsed fine), thrown as Error(kModel) naming the key.
#include <limits>
#include <string>

#include "format/gguf.h"
#include "format/gguf_internal.h"

namespace bicache::format {
namespace {

[[noreturn]] void Fail(std::string_view key, const std::string& what) {
  throw Error(ErrorKind::kModel, "metadata key '" + std::string(key) + "' " + what);
}

std::string TypeDescription(const Value& v) {
  if (v.type == ValueType::ARRAY) return "ARRAY of " + ValueTypeName(v.elem_type);
  return ValueTypeName(v.type);
}

const Value& Require(const GgufFile& file, std::string_view key) {
  const Value* v = file.Find(key);
  if (v == nullptr) Fail(key, "is missing");
  return *v;
}

bool IsIntegerType(ValueType t) {
  Value probe;
  probe.type = t;
  return probe.is_integer();
}

bool IsSignedInteger(ValueType t) {
  return t == ValueType::INT8 || t == ValueType::INT16 || t == ValueType::INT32 ||
         t == ValueType::INT64;
}

uint64_t AsUInt(const Value& v, std::string_view key) {
  if (!v.is_integer()) Fail(key, "has type " + TypeDescription(v) + ", expected an integer");
  if (IsSignedInteger(v.type)) {
    if (v.i < 0) Fail(key, "is " + std::to_string(v.i) + ", expected a non-negative integer");
    return static_cast<uint64_t>(v.i);
  }
  return v.u;
}

int64_t AsInt(const Value& v, std::string_view key) {
  if (!v.is_integer()) Fail(key, "has type " + TypeDescription(v) + ", expected an integer");
  if (IsSignedInteger(v.type)) return v.i;
  if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    Fail(key, "is " + std::to_string(v.u) + ", larger than INT64_MAX");
  }
  return static_cast<int64_t>(v.u);
}

double AsFloat(const Value& v, std::string_view key) {
  if (v.is_float()) return v.f;
  if (v.is_integer())
    return IsSignedInteger(v.type) ? static_cast<double>(v.i) : static_cast<double>(v.u);
  Fail(key, "has type " + TypeDescription(v) + ", expected a number");
}

bool AsBool(const Value& v, std::string_view key) {
  if (v.type != ValueType::BOOL) Fail(key, "has type " + TypeDescription(v) + ", expected BOOL");
  return v.u != 0;
}

const std::string& AsString(const Value& v, std::string_view key) {
  if (v.type != ValueType::STRING) {
    Fail(key, "has type " + TypeDescription(v) + ", expected STRING");
  }
  return v.s;
}

const Value& RequireArray(const GgufFile& file, std::string_view key, bool (*elem_ok)(ValueType),
                          const char* expected) {
  const Value& v = Require(file, key);
  if (v.type != ValueType::ARRAY || !elem_ok(v.elem_type)) {
    Fail(key, "has type " + TypeDescription(v) + ", expected " + expected);
  }
  return v;
}

}  // namespace

uint64_t GgufFile::GetUInt(std::string_view key) const {
  return AsUInt(Require(*this, key), key);
}
int64_t GgufFile::GetInt(std::string_view key) const {
  return AsInt(Require(*this, key), key);
}
double GgufFile::GetFloat(std::string_view key) const {
  return AsFloat(Require(*this, key), key);
}
bool GgufFile::GetBool(std::string_view key) const {
  return AsBool(Require(*this, key), key);
}
const std::string& GgufFile::GetString(std::string_view key) const {
  return AsString(Require(*this, key), key);
}

std::optional<uint64_t> GgufFile::GetUIntOr(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return std::nullopt;
  return AsUInt(*v, key);
}
std::optional<double> GgufFile::GetFloatOr(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return std::nullopt;
  return AsFloat(*v, key);
}
std::optional<bool> GgufFile::GetBoolOr(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return std::nullopt;
  return AsBool(*v, key);
}
std::optional<std::string> GgufFile::GetStringOr(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return std::nullopt;
  return AsString(*v, key);
}

std::vector<std::string> GgufFile::GetStringArray(std::string_view key) const {
  const Value& v = RequireArray(
      *this, key, [](ValueType t) { return t == ValueType::STRING; }, "ARRAY of STRING");
  std::vector<std::string> out;
  out.reserve(v.elems.size());
  for (const Value& e : v.elems) out.push_back(e.s);
  return out;
}

// Integer element types only: a byte or float array is never reinterpreted (GGUF bug class 3).
std::vector<int64_t> GgufFile::GetIntArray(std::string_view key) const {
  const Value& v = RequireArray(*this, key, IsIntegerType, "an ARRAY of integers");
  std::vector<int64_t> out;
  out.reserve(v.elems.size());
  for (const Value& e : v.elems) out.push_back(AsInt(e, key));
  return out;
}

// FLOAT32/FLOAT64 elements only, for the same reason.
std::vector<double> GgufFile::GetFloatArray(std::string_view key) const {
  const Value& v = RequireArray(
      *this, key, [](ValueType t) { return t == ValueType::FLOAT32 || t == ValueType::FLOAT64; },
      "an ARRAY of FLOAT32 or FLOAT64");
  std::vector<double> out;
  out.reserve(v.elems.size());
  for (const Value& e : v.elems) out.push_back(e.f);
  return out;
}

}  // namespace bicache::format
