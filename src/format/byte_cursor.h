// Bounds-checked little-endian reader over a byte range: the GGUF parser's only way to read.
//
// Every read checks the remaining length first and throws Error(kFormat) naming what was being
// read, so a truncated or lying file can never make the parser read past the end.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "util/error.h"

namespace bicache::format::detail {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader copies little-endian fields directly");

class ByteCursor {
 public:
  ByteCursor(const uint8_t* data, uint64_t size) : data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t remaining() const { return size_ - pos_; }

  // Returns a pointer to the next n bytes and advances past them.
  const uint8_t* Take(uint64_t n, std::string_view what) {
    if (n > remaining()) {
      throw Error(ErrorKind::kFormat, "file is truncated: " + std::string(what) + " needs " +
                                          std::to_string(n) + " bytes at offset " +
                                          std::to_string(pos_) + " but only " +
                                          std::to_string(remaining()) + " remain (file size " +
                                          std::to_string(size_) + ")");
    }
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

  uint8_t U8(std::string_view what) { return *Take(1, what); }
  uint16_t U16(std::string_view what) { return Read<uint16_t>(what); }
  uint32_t U32(std::string_view what) { return Read<uint32_t>(what); }
  uint64_t U64(std::string_view what) { return Read<uint64_t>(what); }

  // GGUF string: u64 length + bytes (no NUL). The length is checked against the remaining bytes
  // before anything is allocated.
  std::string String(std::string_view what) {
    uint64_t len = U64(what);
    if (len > remaining()) {
      throw Error(ErrorKind::kFormat,
                  std::string(what) + " declares a string of " + std::to_string(len) +
                      " bytes at offset " + std::to_string(pos_) + " but only " +
                      std::to_string(remaining()) + " bytes remain in the file");
    }
    const uint8_t* p = Take(len, what);
    return std::string(reinterpret_cast<const char*>(p), len);
  }

 private:
  template <typename T>
  T Read(std::string_view what) {
    T v;
    std::memcpy(&v, Take(sizeof(T), what), sizeof(T));
    return v;
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

}  // namespace bicache::format::detail
