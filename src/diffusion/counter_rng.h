// Counter-based random numbers: every draw is a pure function of (seed, block, step, position,
// purpose, index), so a request's output depends only on its seed and its logits -- never on the
// thread count, the order rows are processed in, or which other requests share a batch. No
// generator state is carried between calls.
#pragma once

#include <cstdint>

namespace bicache::diffusion {

// What a draw is used for; keeps the streams of different decisions independent.
enum class RngPurpose : uint64_t {
  kToken = 1,       // sampling x0 from a row's distribution
  kConfidence = 2,  // LLaDA `random` remasking score
  kTransfer = 3,    // Dream `origin` per-position coin flip
  kSelect = 4,      // Dream alg_temp position selection (Gumbel key)
};

// SplitMix64's finalizer: a bijective avalanche mix of 64 bits.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct CounterRng {
  uint64_t seed = 0;

  // 64 random bits for one (block, step, position, purpose) key. Chaining Mix64 over the fields
  // (rather than xor-ing them together) keeps distinct keys from colliding.
  uint64_t Bits(uint64_t block, uint64_t step, uint64_t position, RngPurpose purpose) const {
    uint64_t h = Mix64(seed);
    h = Mix64(h ^ block);
    h = Mix64(h ^ step);
    h = Mix64(h ^ position);
    return Mix64(h ^ static_cast<uint64_t>(purpose));
  }

  // Uniform in the open interval (0, 1): 53 random bits, centred in their cell so that
  // log(u) and log(-log(u)) are always finite.
  double Uniform(uint64_t block, uint64_t step, uint64_t position, RngPurpose purpose) const {
    return (static_cast<double>(Bits(block, step, position, purpose) >> 11) + 0.5) *
           (1.0 / 9007199254740992.0);
  }
};

}  // namespace bicache::diffusion
