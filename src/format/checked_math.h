// Overflow-checked unsigned arithmetic for sizes and offsets read from untrusted files.
//
// Every product or sum that involves a value from a file goes through these, so a crafted
// dimension or offset can never wrap around into a small, "valid-looking" number.
#pragma once

#include <cstdint>

namespace bicache::format::detail {

// *out = a * b; false on overflow (then *out is unspecified).
inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// *out = a + b; false on overflow.
inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// Rounds `value` up to a multiple of `alignment` (a non-zero power of two); false on overflow.
inline bool CheckedAlignUp(uint64_t value, uint64_t alignment, uint64_t* out) {
  uint64_t bumped = 0;
  if (!CheckedAdd(value, alignment - 1, &bumped)) return false;
  *out = bumped & ~(alignment - 1);
  return true;
}

inline bool IsPowerOfTwo(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace bicache::format::detail
