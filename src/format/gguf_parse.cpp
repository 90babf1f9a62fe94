// GGUF parsing and validation: header, metadata, tensor infos, data-section layout.
//
// Order of checks matters: every count or length is compared with the bytes left in the file
// before anything is allocated for it, and every size/offset sum goes through checked arithmetic.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "format/byte_cursor.h"
#include "format/checked_math.h"
#include "format/gguf.h"
#include "format/gguf_internal.h"

namespace bicache::format::detail {
namespace {

constexpr uint64_t kHeaderBytes = 24;  // magic, version, tensor_count, kv_count
// Smallest possible records: a kv is key length + 1-byte key + type + 1-byte value; a tensor
// info is name length + 1-byte name + n_dims + one dim + type + offset.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
constexpr uint64_t kMaxDims = 4;

[[noreturn]] void Fail(const std::string& message) {
  throw Error(ErrorKind::kFormat, message);
}

std::string Quoted(const std::string& s) {
  return "'" + s + "'";
}

void CheckMagic(const uint8_t* data, uint64_t size) {
  if (size < 4) {
    Fail("file is too small to be GGUF: " + std::to_string(size) + " bytes, the header alone is " +
         std::to_string(kHeaderBytes));
  }
  uint32_t magic = 0;
  std::memcpy(&magic, data, 4);
  if (magic != kGgufMagic) {
    char found[32];
    std::snprintf(found, sizeof(found), "%02x %02x %02x %02x", data[0], data[1], data[2], data[3]);
    Fail(std::string("bad magic: expected 'GGUF' (47 47 55 46), found ") + found);
  }
}

void CheckVersion(uint32_t version) {
  if (version == 2 || version == 3) return;
  std::string message = "unsupported GGUF version " + std::to_string(version) +
                        " (only versions 2 and 3 are supported)";
  if (version == 0x02000000 || version == 0x03000000) message += "; the file looks big-endian";
  Fail(message);
}

// Rejects a declared count whose records could not possibly fit in the bytes that remain.
void CheckCountFits(uint64_t count, uint64_t min_record_bytes, uint64_t remaining,
                    const std::string& what) {
  uint64_t needed = 0;
  bool overflow = !CheckedMul(count, min_record_bytes, &needed);
  if (overflow || needed > remaining) {
    Fail(what + " " + std::to_string(count) + " is impossible: each record needs at least " +
         std::to_string(min_record_bytes) + " bytes but only " + std::to_string(remaining) +
         " bytes remain in the file");
  }
}

class MetadataReader {
 public:
  explicit MetadataReader(ByteCursor* cursor) : cursor_(cursor) {}

  Value ReadValue(ValueType type, const std::string& key, int depth) {
    Value v;
    v.type = type;
    const std::string what = "value of metadata key " + Quoted(key);
    switch (type) {
      case ValueType::UINT8:
        v.u = cursor_->U8(what);
        break;
      case ValueType::INT8:
        v.i = static_cast<int8_t>(cursor_->U8(what));
        break;
      case ValueType::UINT16:
        v.u = cursor_->U16(what);
        break;
      case ValueType::INT16:
        v.i = static_cast<int16_t>(cursor_->U16(what));
        break;
      case ValueType::UINT32:
        v.u = cursor_->U32(what);
        break;
      case ValueType::INT32:
        v.i = static_cast<int32_t>(cursor_->U32(what));
        break;
      case ValueType::UINT64:
        v.u = cursor_->U64(what);
        break;
      case ValueType::INT64:
        v.i = static_cast<int64_t>(cursor_->U64(what));
        break;
      case ValueType::FLOAT32: {
        uint32_t bits = cursor_->U32(what);
        float f;
        std::memcpy(&f, &bits, 4);
        v.f = f;
        break;
      }
      case ValueType::FLOAT64: {
        uint64_t bits = cursor_->U64(what);
        std::memcpy(&v.f, &bits, 8);
        break;
      }
      case ValueType::BOOL: {
        uint8_t b = cursor_->U8(what);
        if (b > 1) {
          Fail("metadata key " + Quoted(key) + " has a BOOL value " + std::to_string(b) +
               ", expected 0 or 1");
        }
        v.u = b;
        break;
      }
      case ValueType::STRING:
        v.s = cursor_->String(what);
        break;
      case ValueType::ARRAY:
        ReadArray(&v, key, depth + 1);
        break;
    }
    return v;
  }

  ValueType ReadType(const std::string& key, const char* role) {
    uint32_t raw = cursor_->U32(std::string(role) + " of metadata key " + Quoted(key));
    if (!IsKnownValueType(raw)) {
      Fail("metadata key " + Quoted(key) + " has unknown " + role + " " + std::to_string(raw));
    }
    return static_cast<ValueType>(raw);
  }

 private:
  void ReadArray(Value* v, const std::string& key, int depth) {
    if (depth > kMaxArrayDepth) {
      Fail("metadata key " + Quoted(key) + " nests arrays deeper than " +
           std::to_string(kMaxArrayDepth) + " levels");
    }
    v->elem_type = ReadType(key, "array element type");
    uint64_t count = cursor_->U64("array length of metadata key " + Quoted(key));
    uint64_t min_bytes = MinValueBytes(v->elem_type);
    if (count > cursor_->remaining() / min_bytes) {
      Fail("metadata key " + Quoted(key) + " declares an array of " + std::to_string(count) + " " +
           ValueTypeName(v->elem_type) + " elements but only " +
           std::to_string(cursor_->remaining()) + " bytes remain in the file");
    }
    total_elements_ += count;
    if (total_elements_ > kMaxMetadataElements) {
      Fail("metadata key " + Quoted(key) + " brings the metadata to more than " +
           std::to_string(kMaxMetadataElements) + " array elements in total");
    }
    v->elems.reserve(count);
    for (uint64_t i = 0; i < count; ++i) v->elems.push_back(ReadValue(v->elem_type, key, depth));
  }

  ByteCursor* cursor_;
  uint64_t total_elements_ = 0;
};

void ReadMetadata(ByteCursor* cursor, uint64_t kv_count, ParsedGguf* out) {
  MetadataReader reader(cursor);
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = cursor->String("key of metadata entry #" + std::to_string(i));
    if (key.empty()) Fail("metadata entry #" + std::to_string(i) + " has an empty key");
    ValueType type = reader.ReadType(key, "value type");
    Value value = reader.ReadValue(type, key, 0);
    if (!out->metadata.emplace(key, std::move(value)).second) {
      Fail("duplicate metadata key " + Quoted(key));
    }
  }
}

uint64_t ReadAlignment(const std::map<std::string, Value>& metadata) {
  auto it = metadata.find(kAlignmentKey);
  if (it == metadata.end()) return kDefaultAlignment;
  const Value& v = it->second;
  if (v.type != ValueType::UINT32) {
    Fail(std::string("metadata key '") + kAlignmentKey + "' has type " + ValueTypeName(v.type) +
         ", expected UINT32");
  }
  if (!IsPowerOfTwo(v.u)) {
    Fail(std::string("metadata key '") + kAlignmentKey + "' is " + std::to_string(v.u) +
         ", expected a non-zero power of two");
  }
  return v.u;
}

TensorType ReadTensorType(ByteCursor* cursor, const std::string& name, uint64_t* block_elems,
                          uint64_t* block_bytes) {
  uint32_t raw = cursor->U32("type of tensor " + Quoted(name));
  TensorType type = static_cast<TensorType>(raw);
  if (TensorTypeLayout(type, block_elems, block_bytes)) return type;
  if (IsGgmlTypeWithoutLayout(raw)) {
    throw Error(
        ErrorKind::kUnsupported,
        "tensor " + Quoted(name) + " has ggml type " + GgmlTypeWithoutLayoutName(raw) + " (" +
            std::to_string(raw) +
            "), which this program cannot read (supported quantizations: Q4_0, Q4_1, Q5_0, Q5_1, "
            "Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
  }
  Fail("tensor " + Quoted(name) + " has unknown type " + std::to_string(raw));
}

TensorInfo ReadTensorInfo(ByteCursor* cursor, uint64_t index, uint64_t alignment) {
  TensorInfo t;
  t.name = cursor->String("name of tensor #" + std::to_string(index));
  if (t.name.empty()) Fail("tensor #" + std::to_string(index) + " has an empty name");
  const std::string qname = Quoted(t.name);

  uint32_t n_dims = cursor->U32("dimension count of tensor " + qname);
  if (n_dims == 0 || n_dims > kMaxDims) {
    Fail("tensor " + qname + " has " + std::to_string(n_dims) + " dimensions, expected 1 to " +
         std::to_string(kMaxDims));
  }
  t.ne.reserve(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    uint64_t n = cursor->U64("dimension " + std::to_string(d) + " of tensor " + qname);
    if (n == 0) Fail("tensor " + qname + " has dimension " + std::to_string(d) + " equal to 0");
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail("tensor " + qname + " has dimension " + std::to_string(d) + " = " + std::to_string(n) +
           ", larger than INT64_MAX");
    }
    t.ne.push_back(n);
  }

  uint64_t block_elems = 0, block_bytes = 0;
  t.type = ReadTensorType(cursor, t.name, &block_elems, &block_bytes);
  t.offset = cursor->U64("data offset of tensor " + qname);

  uint64_t n = 1;
  for (uint64_t d : t.ne) {
    if (!CheckedMul(n, d, &n) || n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      Fail("tensor " + qname + " has shape " + ShapeString(t.ne) +
           " whose element count overflows");
    }
  }
  t.n_elements = n;
  if (t.ne[0] % block_elems != 0) {
    Fail("tensor " + qname + " of type " + TensorTypeName(t.type) +
         " has ne[0] = " + std::to_string(t.ne[0]) + ", not a multiple of its block size " +
         std::to_string(block_elems));
  }
  if (!CheckedMul(n / block_elems, block_bytes, &t.n_bytes)) {
    Fail("tensor " + qname + " has shape " + ShapeString(t.ne) + " whose byte size overflows");
  }
  if (t.offset % alignment != 0) {
    Fail("tensor " + qname + " has data offset " + std::to_string(t.offset) +
         ", not a multiple of the alignment " + std::to_string(alignment));
  }
  return t;
}

// Places every tensor in the data section: inside the file, and no two overlapping.
void PlaceTensors(const uint8_t* data, uint64_t size, ParsedGguf* out) {
  if (out->tensors.empty()) return;
  if (out->data_start > size) {
    Fail("data section would start at offset " + std::to_string(out->data_start) +
         ", past the end of the file (" + std::to_string(size) + " bytes)");
  }
  for (TensorInfo& t : out->tensors) {
    uint64_t begin = 0, end = 0;
    if (!CheckedAdd(out->data_start, t.offset, &begin) || !CheckedAdd(begin, t.n_bytes, &end) ||
        end > size) {
      Fail("tensor " + Quoted(t.name) + " data (offset " + std::to_string(t.offset) + ", " +
           std::to_string(t.n_bytes) + " bytes) extends past the end of the file (" +
           std::to_string(size) + " bytes, data section at " + std::to_string(out->data_start) +
           ")");
    }
    t.data = data + begin;
  }
  std::vector<const TensorInfo*> by_offset;
  by_offset.reserve(out->tensors.size());
  for (const TensorInfo& t : out->tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo* prev = by_offset[i - 1];
    const TensorInfo* cur = by_offset[i];
    if (prev->offset + prev->n_bytes > cur->offset) {  // no overflow: both checked above
      Fail("tensors " + Quoted(prev->name) + " and " + Quoted(cur->name) +
           " overlap in the data section");
    }
  }
}

}  // namespace

ParsedGguf ParseGguf(const uint8_t* data, uint64_t size) {
  CheckMagic(data, size);
  ByteCursor cursor(data, size);
  cursor.Take(4, "magic");
  ParsedGguf out;
  out.version = cursor.U32("version");
  CheckVersion(out.version);
  uint64_t tensor_count = cursor.U64("tensor count");
  uint64_t kv_count = cursor.U64("metadata kv count");
  CheckCountFits(kv_count, kMinKvBytes, cursor.remaining(), "metadata kv count");
  CheckCountFits(tensor_count, kMinTensorInfoBytes, cursor.remaining(), "tensor count");
  uint64_t kv_min = kv_count * kMinKvBytes, tensor_min = tensor_count * kMinTensorInfoBytes;
  if (kv_min + tensor_min > cursor.remaining()) {  // each term <= remaining: no overflow
    Fail("metadata kv count " + std::to_string(kv_count) + " and tensor count " +
         std::to_string(tensor_count) + " together need at least " +
         std::to_string(kv_min + tensor_min) + " bytes but only " +
         std::to_string(cursor.remaining()) + " bytes remain in the file");
  }

  ReadMetadata(&cursor, kv_count, &out);
  out.alignment = ReadAlignment(out.metadata);

  out.tensors.reserve(tensor_count);
  std::set<std::string_view> names;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    out.tensors.push_back(ReadTensorInfo(&cursor, i, out.alignment));
  }
  for (const TensorInfo& t : out.tensors) {  // names point into the (now stable) vector
    if (!names.insert(t.name).second) Fail("duplicate tensor name " + Quoted(t.name));
  }

  if (!CheckedAlignUp(cursor.pos(), out.alignment, &out.data_start)) {
    Fail("data section offset overflows");
  }
  PlaceTensors(data, size, &out);
  return out;
}

}  // namespace bicache::format::detail
