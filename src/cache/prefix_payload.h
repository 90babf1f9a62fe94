// The data a cached prefix carries, as far as the cache is concerned: an opaque object of known
// size.
//
// The engine subclasses it with whatever one prefix needs (per-layer K/V rows, boundary hidden
// states); the store never looks inside, it only owns the object and counts `bytes()` against its
// budget. Payloads are immutable once inserted and shared read-only by every request that pins
// them.
#pragma once

#include <cstddef>

namespace bicache::cache {

struct PrefixPayload {
  virtual ~PrefixPayload();
  // Memory this payload holds, in bytes. Read once when the payload is inserted, so it must not
  // change afterwards.
  virtual size_t bytes() const = 0;
};

}  // namespace bicache::cache
