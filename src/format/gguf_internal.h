// Private pieces shared by the GGUF reader's source files (not part of the public API).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "format/gguf.h"

namespace bicache::format::detail {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr const char* kAlignmentKey = "general.alignment";
// Deepest array-of-array nesting accepted (a top-level array is depth 1). Real files use 1.
constexpr int kMaxArrayDepth = 4;
// Cap on array elements over all metadata. Each parsed element costs ~100 bytes of memory, so
// this bounds the memory a hostile file can make us allocate (~800 MiB); real vocabularies use
// well under a million.
constexpr uint64_t kMaxMetadataElements = uint64_t{1} << 23;

// True for the 13 value types defined by GGUF.
bool IsKnownValueType(uint32_t type);
// Fewest bytes one value of this type can occupy in the file (used to reject impossible counts
// before allocating).
uint64_t MinValueBytes(ValueType type);
// True for type numbers ggml defines but this project has no block layout for (IQ*, TQ*, ...):
// such files are valid but unsupported, unlike numbers ggml never defined.
bool IsGgmlTypeWithoutLayout(uint32_t type);
// The ggml name of such a type ("IQ2_XXS", ...).
std::string GgmlTypeWithoutLayoutName(uint32_t type);

// The validated contents of a GGUF image; tensor data pointers point into that image.
struct ParsedGguf {
  uint32_t version = 0;
  uint64_t alignment = kDefaultAlignment;
  uint64_t data_start = 0;  // absolute file offset of the data section
  std::map<std::string, Value> metadata;
  std::vector<TensorInfo> tensors;
};

// Parses and validates `size` bytes at `data`. Throws Error(kFormat) or Error(kUnsupported).
ParsedGguf ParseGguf(const uint8_t* data, uint64_t size);

}  // namespace bicache::format::detail

namespace bicache::format {

// Owns the bytes (a read-only mapping or a copied buffer) and the parsed view of them.
struct GgufFile::Impl {
  void* mapping = nullptr;  // mmap'd file, or nullptr when `copy` holds the bytes
  uint64_t mapping_size = 0;
  std::vector<uint8_t> copy;
  uint64_t size = 0;
  detail::ParsedGguf parsed;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl();
};

}  // namespace bicache::format
