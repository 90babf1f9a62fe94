// What a cached prefix holds for the engine: the prefix's K/V for the layers it may serve and the
// hidden states at the layer boundaries a request may rejoin from, all computed from the prefix
// alone. Layers the entry will never serve are not stored (the reference stored all of them).
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "cache/prefix_payload.h"
#include "model/plan.h"
#include "model/weights.h"

namespace bicache::engine {

struct PrefixKvPayload : cache::PrefixPayload {
  model::SeqKv
      kv;  // n_tok = prefix length; layers[l] for l < layers_held; hidden[l] for 1..layers_held
  int layers_held = 0;  // serves any depth b <= layers_held
  size_t bytes() const override { return kv.bytes(); }
};

// The forward of one prefix alone, run a few layers at a time (model::ForwardLayers), so the
// scheduler can interleave it with the running requests' steps. Captures K/V of layers
// [0, layers) and the hidden inputs of layers 1..layers (none for a block-diffusion model, whose
// entries are reused at every layer; hidden[L] is never a rejoin point, so it is dropped).
class PrefixBuild {
 public:
  PrefixBuild(const model::Model& model, std::vector<int32_t> prefix, int layers);
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int layers() const { return layers_; }
  int next_layer() const { return next_layer_; }
  bool done() const { return next_layer_ >= layers_; }
  // Runs layers [next_layer, next_layer + count) of every build in `builds` (all at the same
  // next_layer, none done; count clipped to the fewest layers left) in one stacked forward.
  static void AdvanceTogether(std::span<PrefixBuild* const> builds, int count,
                              model::ForwardStats* stats);
  // The finished entry (once done()); the build is spent afterwards.
  std::shared_ptr<PrefixKvPayload> Take();

 private:
  const model::Model& model_;
  std::vector<int32_t> tokens_;
  std::shared_ptr<PrefixKvPayload> payload_;
  std::vector<float> hidden_;  // [n, d]: the input of next_layer_
  int layers_ = 0;             // layers held by the entry
  int next_layer_ = 0;
};

// The whole build at once (Engine::Start outside the scheduler).
std::shared_ptr<PrefixKvPayload> BuildPrefixPayload(const model::Model& model,
                                                    std::span<const int32_t> prefix, int layers,
                                                    model::ForwardStats* stats);

// Copies the cached prefix rows for layers < depth (and the hidden state at `depth` when
// depth < L) into a request's SeqKv, whose first prefix.n_tok positions are the prefix.
void CopyPrefixInto(const PrefixKvPayload& prefix, int depth, model::SeqKv* request_kv, int d_model,
                    int kv_dim);

}  // namespace bicache::engine
