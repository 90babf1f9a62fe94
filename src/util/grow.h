// Scratch buffers that are only ever grown: per-thread activations and kernel workspaces keep their
// largest size, so a hot loop does not allocate (and zero-fill) them on every call.
#pragma once

#include <cstddef>
#include <vector>

namespace bicache {

// Grows `buf` to at least n elements (never shrinks it) and returns its data. Contents beyond what
// the caller writes are stale.
template <typename T>
T* GrowTo(std::vector<T>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace bicache
