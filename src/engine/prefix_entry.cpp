#include "engine/prefix_entry.h"

#include <algorithm>

#include "model/forward.h"

namespace bicache::engine {

std::shared_ptr<PrefixKvPayload> BuildPrefixPayload(const model::Model& model,
                                                    std::span<const int32_t> prefix, int layers,
                                                    model::ForwardStats* stats) {
  const int L = model.config().n_layer;
  auto payload = std::make_shared<PrefixKvPayload>();
  payload->layers_held = std::clamp(layers, 0, L);
  payload->kv.Reset(L, static_cast<int>(prefix.size()));
  model::SeqPlan plan;
  plan.tokens = prefix;
  plan.kv_out = &payload->kv;
  plan.capture_kv_layers = payload->layers_held;
  // A block-diffusion entry is reused at every layer, exactly: no request rejoins from a hidden
  // state, so none is kept.
  plan.capture_hidden_max = model.config().block_causal() ? 0 : payload->layers_held;
  model::Forward(model, {&plan, 1}, stats);
  if (payload->layers_held == L) payload->kv.hidden[L].clear();  // never a rejoin point
  for (auto& h : payload->kv.hidden) h.shrink_to_fit();
  return payload;
}

void CopyPrefixInto(const PrefixKvPayload& prefix, int depth, model::SeqKv* request_kv, int d_model,
                    int kv_dim) {
  const int p = prefix.kv.n_tok;
  const int n = request_kv->n_tok;
  const int L = static_cast<int>(request_kv->layers.size());
  for (int l = 0; l < depth; ++l) {
    model::LayerKv& dst = request_kv->layers[l];
    const model::LayerKv& src = prefix.kv.layers[l];
    // Copy the prefix rows, then grow: only the rows after the prefix are zero-filled.
    dst.k.assign(src.k.begin(), src.k.begin() + static_cast<ptrdiff_t>(p) * kv_dim);
    dst.v.assign(src.v.begin(), src.v.begin() + static_cast<ptrdiff_t>(p) * kv_dim);
    dst.k.resize(static_cast<size_t>(n) * kv_dim);
    dst.v.resize(static_cast<size_t>(n) * kv_dim);
  }
  if (depth > 0 && depth < L) {
    auto& dst = request_kv->hidden[depth];
    const auto& src = prefix.kv.hidden[depth];
    dst.assign(src.begin(), src.begin() + static_cast<ptrdiff_t>(p) * d_model);
    dst.resize(static_cast<size_t>(n) * d_model);
  }
}

}  // namespace bicache::engine
