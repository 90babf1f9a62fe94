// GGUF reader and writer (versions 2 and 3).
//
// The reader memory-maps the file and validates every count, length, offset, shape and type
// against the file size and against integer overflow before using it. Any problem is thrown as
// bicache::Error (kIo for the OS, kFormat for the contents) whose message names the key or tensor
// and what was wrong. Nothing asserts or aborts on bad input.
//
// Dimension convention (as in ggml): `ne` lists dimensions fastest-varying first, so a PyTorch
// weight of shape [out, in] has ne = {in, out}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "format/tensor_type.h"
#include "util/error.h"

namespace bicache::format {

// GGUF metadata value types.
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string ValueTypeName(ValueType type);

// One metadata value. Scalars keep their stored type; arrays hold their elements (which may be
// arrays again: nested arrays are allowed).
struct Value {
  ValueType type = ValueType::UINT8;
  // Scalars: exactly one of these is meaningful depending on `type`.
  uint64_t u = 0;                          // UINT8/16/32/64, BOOL (0/1)
  int64_t i = 0;                           // INT8/16/32/64
  double f = 0;                            // FLOAT32/64
  std::string s;                           // STRING
  ValueType elem_type = ValueType::UINT8;  // ARRAY: element type
  std::vector<Value> elems;                // ARRAY: elements

  bool is_integer() const;  // any of the 8 integer types (not BOOL)
  bool is_float() const { return type == ValueType::FLOAT32 || type == ValueType::FLOAT64; }

  // Factories used by the writer and tests.
  static Value U32(uint32_t v);
  static Value I32(int32_t v);
  static Value U64(uint64_t v);
  static Value F32(float v);
  static Value Bool(bool v);
  static Value Str(std::string v);
  static Value Array(ValueType elem_type, std::vector<Value> elems);
  static Value StrArray(const std::vector<std::string>& v);
  static Value I32Array(const std::vector<int32_t>& v);
  static Value F32Array(const std::vector<float>& v);
};

// How GgufFile::Open holds the file's bytes.
struct OpenOptions {
  // true: memory-map the file (pages load on demand and are shared with the page cache; a file
  // rewritten or truncated in place under a running process can then kill it with SIGBUS: replace
  // served files by rename). false: read the whole file into memory once.
  bool mmap = true;
  // Lock the bytes in RAM (mlock) so the OS never pages the weights out; needs RLIMIT_MEMLOCK.
  bool mlock = false;
};

// A parsed, memory-mapped (or read) GGUF file. Move-only; tensor data pointers live as long as it
// does.
class GgufFile {
 public:
  // Opens and validates `path`. Throws Error(kIo) / Error(kFormat).
  static GgufFile Open(const std::string& path, OpenOptions options = {});
  // Parses an in-memory image (copied). Used by tests and fuzzers.
  static GgufFile FromBytes(std::span<const uint8_t> bytes);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  uint32_t version() const;
  uint64_t alignment() const;
  uint64_t file_size() const;

  // ---- metadata ----
  const std::map<std::string, Value>& metadata() const;
  const Value* Find(std::string_view key) const;  // nullptr if absent
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  // Typed getters: throw Error(kModel) naming the key if absent (for Get*) or of a wrong type.
  // Integer getters accept any integer type whose value fits; float getters accept any number.
  uint64_t GetUInt(std::string_view key) const;
  int64_t GetInt(std::string_view key) const;
  double GetFloat(std::string_view key) const;
  bool GetBool(std::string_view key) const;
  const std::string& GetString(std::string_view key) const;
  std::optional<uint64_t> GetUIntOr(std::string_view key) const;  // nullopt if absent
  std::optional<double> GetFloatOr(std::string_view key) const;
  std::optional<bool> GetBoolOr(std::string_view key) const;
  std::optional<std::string> GetStringOr(std::string_view key) const;
  // Arrays: throw Error(kModel) naming the key if absent or of a wrong element type.
  std::vector<std::string> GetStringArray(std::string_view key) const;
  std::vector<int64_t> GetIntArray(std::string_view key) const;
  std::vector<double> GetFloatArray(std::string_view key) const;

  // ---- tensors (in file order) ----
  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* FindTensor(std::string_view name) const;  // nullptr if absent

 private:
  struct Impl;
  explicit GgufFile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Builds a GGUF v3 file. Tensor data is given already encoded in its type's storage format.
class GgufWriter {
 public:
  void SetValue(const std::string& key, Value value);  // replaces an existing key
  void SetAlignment(uint64_t alignment);               // writes general.alignment; default 32
  // ne fastest-varying first; data.size() must equal the type's storage size for ne.
  void AddTensor(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                 std::vector<uint8_t> data);
  void AddTensorF32(const std::string& name, std::vector<uint64_t> ne,
                    std::span<const float> values);  // encoded as F32
  std::vector<uint8_t> ToBytes() const;
  void Write(const std::string& path) const;  // throws Error(kIo)

  // Streaming write for files too big to hold twice: the metadata set so far and these tensor
  // infos (checked as AddTensor checks them), then each tensor's data as produce(i) returns it
  // (exactly its storage size, else Error(kInvalidArgument)), one tensor in memory at a time.
  // Tensors added with AddTensor are not written. Throws Error(kIo) naming the path.
  struct StreamedTensor {
    std::string name;
    TensorType type = TensorType::F32;
    std::vector<uint64_t> ne;
  };
  void WriteStreamed(const std::string& path, const std::vector<StreamedTensor>& tensors,
                     const std::function<std::vector<uint8_t>(size_t index)>& produce) const;

 private:
  std::vector<std::pair<std::string, Value>> kv_;
  struct PendingTensor {
    std::string name;
    TensorType type;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> data;
  };
  std::vector<PendingTensor> tensors_;
  uint64_t alignment_ = 32;
};

// Encoders from float32 into storage formats (used by the writer's callers and tests).
std::vector<uint8_t> EncodeTensor(TensorType type, std::span<const float> values);

}  // namespace bicache::format
