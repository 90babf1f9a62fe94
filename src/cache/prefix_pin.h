// PrefixPin: a request's hold on one cached prefix (RAII, move-only).
//
// While a pin lives its entry stays in the store and is never evicted; the pinned bytes count as
// "pinned" in the store's stats. Dropping the pin is the only release, so a request that finishes,
// fails or is cancelled releases by destroying (or reassigning) its pin. A pin may outlive its
// store: it keeps the store's shared state alive, and the entry is freed when the last pin drops.
// One pin object is not safe to use from two threads at once; distinct pins are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "cache/prefix_payload.h"
#include "cache/prefix_tree.h"

namespace bicache::cache {

struct PrefixStoreState;  // cache/prefix_store_state.h
struct PrefixEntry;

class PrefixPin {
 public:
  PrefixPin(PrefixPin&& other) noexcept;
  PrefixPin& operator=(PrefixPin&& other) noexcept;
  PrefixPin(const PrefixPin&) = delete;
  PrefixPin& operator=(const PrefixPin&) = delete;
  ~PrefixPin();

  // The cached prefix's token ids; empty for a moved-from pin.
  std::span<const int32_t> tokens() const { return tokens_.view(); }
  size_t length() const { return tokens_.length; }
  // The entry's payload (null for a moved-from pin); downcast with std::static_pointer_cast.
  const std::shared_ptr<const PrefixPayload>& payload() const { return payload_; }

 private:
  friend class PrefixStore;
  // Takes over one pin count already added to `entry` under the state's lock.
  PrefixPin(std::shared_ptr<PrefixStoreState> state, PrefixEntry* entry);
  void Release() noexcept;

  std::shared_ptr<PrefixStoreState> state_;       // null once released or moved from
  PrefixEntry* entry_ = nullptr;                  // alive while pinned; guarded by state_->mutex
  SharedTokens tokens_;                           // immutable copies of the entry's fields, so the
  std::shared_ptr<const PrefixPayload> payload_;  // accessors need no lock
};

}  // namespace bicache::cache
