#include "cache/prefix_pin.h"

#include <utility>

#include "cache/prefix_store_state.h"

namespace bicache::cache {

PrefixPin::PrefixPin(std::shared_ptr<PrefixStoreState> state, PrefixEntry* entry)
    : state_(std::move(state)), entry_(entry), tokens_(entry->tokens), payload_(entry->payload) {}

PrefixPin::PrefixPin(PrefixPin&& other) noexcept
    : state_(std::move(other.state_)),
      entry_(std::exchange(other.entry_, nullptr)),
      tokens_(std::exchange(other.tokens_, {})),
      payload_(std::move(other.payload_)) {}

PrefixPin& PrefixPin::operator=(PrefixPin&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    entry_ = std::exchange(other.entry_, nullptr);
    tokens_ = std::exchange(other.tokens_, {});
    payload_ = std::move(other.payload_);
  }
  return *this;
}

PrefixPin::~PrefixPin() {
  Release();
}

void PrefixPin::Release() noexcept {
  if (!state_) return;
  {
    RetiredPayloads retired;  // freed after the lock is released
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->Unpin(*entry_, retired);
  }
  entry_ = nullptr;
  tokens_ = {};
  payload_.reset();
  state_.reset();  // may destroy the state if the store is gone and this was the last pin
}

}  // namespace bicache::cache
