// Builders for hand-made GGUF images, and the catalogue of malformed files used by the GGUF
// tests (and committed to tests/data/gguf_bad/ as seeds for fuzzing and CLI tests).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace bicache::testing {

using Bytes = std::vector<uint8_t>;

// Little-endian field encoders.
Bytes LeU8(uint8_t v);
Bytes LeU32(uint32_t v);
Bytes LeU64(uint64_t v);
Bytes GgufString(const std::string& s);  // u64 length + bytes
Bytes Concat(std::initializer_list<Bytes> parts);

// One metadata record: key, u32 value type, then the already-encoded value.
Bytes KvRecord(const std::string& key, uint32_t value_type, const Bytes& value);

struct RawTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;        // written as given
  std::optional<uint32_t> n_dims;  // default ne.size(); set to lie about it
  uint32_t type = 0;               // ggml type number (0 = F32)
  uint64_t offset = 0;
};

// A GGUF image assembled field by field, so any field can be set to a bad value.
struct RawGguf {
  uint32_t magic = 0x46554747;  // "GGUF"
  uint32_t version = 3;
  std::optional<uint64_t> tensor_count;  // default: tensors.size()
  std::optional<uint64_t> kv_count;      // default: kvs.size()
  std::vector<Bytes> kvs;                // from KvRecord (or raw bytes)
  std::vector<RawTensorInfo> tensors;
  uint64_t alignment = 32;  // padding used before the data section
  Bytes data;               // the data section, appended after that padding

  Bytes Build() const;
};

struct BadGguf {
  std::string file_name;  // e.g. "bad_magic.gguf"
  Bytes bytes;
  std::string expect_in_message;  // the key/tensor/field the error must name
};

// Every malformed-file class; each must be rejected with Error(kFormat).
std::vector<BadGguf> MakeBadGgufFiles();

}  // namespace bicache::testing
