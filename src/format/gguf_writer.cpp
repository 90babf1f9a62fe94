// GgufWriter: serialises metadata (insertion order) and tensors (aligned) as GGUF v3.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>

#include "format/checked_math.h"
#include "format/gguf.h"
#include "format/gguf_internal.h"

namespace bicache::format {
namespace {

[[noreturn]] void Invalid(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

class ByteSink {
 public:
  template <typename T>
  void Put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint64_t>(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void PutBytes(const std::vector<uint8_t>& b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  void PadTo(uint64_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_.push_back(0);
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

void PutValue(ByteSink* out, const Value& v, const std::string& key) {
  switch (v.type) {
    case ValueType::UINT8:
      out->Put<uint8_t>(static_cast<uint8_t>(v.u));
      return;
    case ValueType::INT8:
      out->Put<int8_t>(static_cast<int8_t>(v.i));
      return;
    case ValueType::UINT16:
      out->Put<uint16_t>(static_cast<uint16_t>(v.u));
      return;
    case ValueType::INT16:
      out->Put<int16_t>(static_cast<int16_t>(v.i));
      return;
    case ValueType::UINT32:
      out->Put<uint32_t>(static_cast<uint32_t>(v.u));
      return;
    case ValueType::INT32:
      out->Put<int32_t>(static_cast<int32_t>(v.i));
      return;
    case ValueType::UINT64:
      out->Put<uint64_t>(v.u);
      return;
    case ValueType::INT64:
      out->Put<int64_t>(v.i);
      return;
    case ValueType::FLOAT32:
      out->Put<float>(static_cast<float>(v.f));
      return;
    case ValueType::FLOAT64:
      out->Put<double>(v.f);
      return;
    case ValueType::BOOL:
      out->Put<uint8_t>(v.u ? 1 : 0);
      return;
    case ValueType::STRING:
      out->PutString(v.s);
      return;
    case ValueType::ARRAY:
      out->Put<uint32_t>(static_cast<uint32_t>(v.elem_type));
      out->Put<uint64_t>(v.elems.size());
      for (const Value& e : v.elems) {
        if (e.type != v.elem_type) {
          Invalid("metadata key '" + key + "': array of " + ValueTypeName(v.elem_type) +
                  " holds an element of type " + ValueTypeName(e.type));
        }
        PutValue(out, e, key);
      }
      return;
  }
  Invalid("metadata key '" + key + "' has unknown value type " +
          std::to_string(static_cast<uint32_t>(v.type)));
}

}  // namespace

void GgufWriter::SetValue(const std::string& key, Value value) {
  if (key.empty()) Invalid("metadata key must not be empty");
  // A valid general.alignment also moves the data layout; an invalid one is written as given
  // (tests use the writer to build malformed files) while the layout keeps the old alignment.
  if (key == detail::kAlignmentKey && value.type == ValueType::UINT32 &&
      detail::IsPowerOfTwo(value.u)) {
    alignment_ = value.u;
  }
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::SetAlignment(uint64_t alignment) {
  if (!detail::IsPowerOfTwo(alignment) || alignment > UINT32_MAX) {
    Invalid("alignment " + std::to_string(alignment) +
            " must be a non-zero power of two that fits in 32 bits");
  }
  SetValue(detail::kAlignmentKey, Value::U32(static_cast<uint32_t>(alignment)));
}

namespace {

// Validates a tensor's name, type and shape as the reader will; returns its storage size.
uint64_t CheckedTensorBytes(const std::string& name, TensorType type,
                            const std::vector<uint64_t>& ne) {
  if (name.empty()) Invalid("tensor name must not be empty");
  uint64_t block_elems = 0, block_bytes = 0;
  if (!TensorTypeLayout(type, &block_elems, &block_bytes)) {
    Invalid("tensor '" + name + "' has unknown type " + TensorTypeName(type));
  }
  if (ne.empty() || ne.size() > 4) {
    Invalid("tensor '" + name + "' has " + std::to_string(ne.size()) +
            " dimensions, expected 1 to 4");
  }
  uint64_t n = 1;
  for (uint64_t d : ne) {
    if (d == 0) Invalid("tensor '" + name + "' has a zero dimension");
    if (!detail::CheckedMul(n, d, &n)) Invalid("tensor '" + name + "' element count overflows");
  }
  if (ne[0] % block_elems != 0) {
    Invalid("tensor '" + name + "' of type " + TensorTypeName(type) +
            " has ne[0] = " + std::to_string(ne[0]) + ", not a multiple of its block size " +
            std::to_string(block_elems));
  }
  uint64_t bytes = 0;
  if (!detail::CheckedMul(n / block_elems, block_bytes, &bytes)) {
    Invalid("tensor '" + name + "' storage size overflows");
  }
  return bytes;
}

}  // namespace

void GgufWriter::AddTensor(const std::string& name, TensorType type, std::vector<uint64_t> ne,
                           std::vector<uint8_t> data) {
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) Invalid("duplicate tensor name '" + name + "'");
  }
  const uint64_t bytes = CheckedTensorBytes(name, type, ne);
  if (bytes != data.size()) {
    Invalid("tensor '" + name + "' of type " + TensorTypeName(type) + " needs " +
            std::to_string(bytes) + " bytes of data, got " + std::to_string(data.size()));
  }
  tensors_.push_back({name, type, std::move(ne), std::move(data)});
}

void GgufWriter::AddTensorF32(const std::string& name, std::vector<uint64_t> ne,
                              std::span<const float> values) {
  AddTensor(name, TensorType::F32, std::move(ne), EncodeTensor(TensorType::F32, values));
}

std::vector<uint8_t> GgufWriter::ToBytes() const {
  ByteSink out;
  out.Put<uint32_t>(detail::kGgufMagic);
  out.Put<uint32_t>(3);
  out.Put<uint64_t>(tensors_.size());
  out.Put<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    out.PutString(key);
    out.Put<uint32_t>(static_cast<uint32_t>(value.type));
    PutValue(&out, value, key);
  }
  // Offsets are relative to the data section; each tensor starts on an alignment boundary.
  uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    out.PutString(t.name);
    out.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) out.Put<uint64_t>(d);
    out.Put<uint32_t>(static_cast<uint32_t>(t.type));
    out.Put<uint64_t>(offset);
    offset += t.data.size();
    offset = (offset + alignment_ - 1) & ~(alignment_ - 1);
  }
  if (!tensors_.empty()) out.PadTo(alignment_);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.PutBytes(tensors_[i].data);
    // No padding after the last tensor: the file ends where its data does.
    if (i + 1 < tensors_.size()) out.PadTo(alignment_);
  }
  return std::move(out.bytes());
}

void GgufWriter::Write(const std::string& path) const {
  std::vector<uint8_t> bytes = ToBytes();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    throw Error(ErrorKind::kIo, "cannot create '" + path + "': " + std::strerror(errno));
  }
  size_t written = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), f);
  int write_errno = errno;
  bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !closed) {
    throw Error(ErrorKind::kIo, "cannot write '" + path + "': " +
                                    std::strerror(written != bytes.size() ? write_errno : errno));
  }
}

void GgufWriter::WriteStreamed(const std::string& path, const std::vector<StreamedTensor>& tensors,
                               const std::function<std::vector<uint8_t>(size_t)>& produce) const {
  std::vector<uint64_t> sizes;
  std::set<std::string> names;
  for (const StreamedTensor& t : tensors) {
    if (!names.insert(t.name).second) Invalid("duplicate tensor name '" + t.name + "'");
    sizes.push_back(CheckedTensorBytes(t.name, t.type, t.ne));
  }
  ByteSink head;
  head.Put<uint32_t>(detail::kGgufMagic);
  head.Put<uint32_t>(3);
  head.Put<uint64_t>(tensors.size());
  head.Put<uint64_t>(kv_.size());
  for (const auto& [key, value] : kv_) {
    head.PutString(key);
    head.Put<uint32_t>(static_cast<uint32_t>(value.type));
    PutValue(&head, value, key);
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const StreamedTensor& t = tensors[i];
    head.PutString(t.name);
    head.Put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (uint64_t d : t.ne) head.Put<uint64_t>(d);
    head.Put<uint32_t>(static_cast<uint32_t>(t.type));
    head.Put<uint64_t>(offset);
    offset += sizes[i];
    offset = (offset + alignment_ - 1) & ~(alignment_ - 1);
  }
  if (!tensors.empty()) head.PadTo(alignment_);

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    throw Error(ErrorKind::kIo, "cannot create '" + path + "': " + std::strerror(errno));
  }
  auto write = [&](const uint8_t* p, size_t n) {
    if (n != 0 && std::fwrite(p, 1, n, f) != n) {
      const int e = errno;
      std::fclose(f);
      throw Error(ErrorKind::kIo, "cannot write '" + path + "': " + std::strerror(e));
    }
  };
  write(head.bytes().data(), head.bytes().size());
  uint64_t pos = head.bytes().size();
  static const uint8_t kZeros[256] = {};
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::vector<uint8_t> data;
    try {
      data = produce(i);
    } catch (...) {
      std::fclose(f);
      throw;
    }
    if (data.size() != sizes[i]) {
      std::fclose(f);
      Invalid("tensor '" + tensors[i].name + "' of type " + TensorTypeName(tensors[i].type) +
              " needs " + std::to_string(sizes[i]) + " bytes of data, got " +
              std::to_string(data.size()));
    }
    write(data.data(), data.size());
    pos += data.size();
    if (i + 1 < tensors.size()) {  // no padding after the last tensor, as ToBytes
      while (pos % alignment_ != 0) {
        const size_t n = std::min<uint64_t>(sizeof kZeros, alignment_ - pos % alignment_);
        write(kZeros, n);
        pos += n;
      }
    }
  }
  if (std::fclose(f) != 0) {
    throw Error(ErrorKind::kIo, "cannot write '" + path + "': " + std::strerror(errno));
  }
}

}  // namespace bicache::format
