// What a cached prefix holds for the engine: the prefix's K/V for the layers it may serve and the
// hidden states at the layer boundaries a request may rejoin from, all computed from the prefix
// alone. Layers the entry will never serve are not stored (the reference stored all of them).
#pragma once

#include <memory>
#include <span>

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

// Runs the prefix alone and captures K/V of layers [0, layers) and hidden inputs of layers
// 1..layers (hidden[L] is not needed when layers == L, so it is dropped).
std::shared_ptr<PrefixKvPayload> BuildPrefixPayload(const model::Model& model,
                                                    std::span<const int32_t> prefix, int layers,
                                                    model::ForwardStats* stats);

// Copies the cached prefix rows for layers < depth (and the hidden state at `depth` when
// depth < L) into a request's SeqKv, whose first prefix.n_tok positions are the prefix.
void CopyPrefixInto(const PrefixKvPayload& prefix, int depth, model::SeqKv* request_kv, int d_model,
                    int kv_dim);

}  // namespace bicache::engine
