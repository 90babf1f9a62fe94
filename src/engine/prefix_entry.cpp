#include "engine/prefix_entry.h"

#include <algorithm>

#include "model/forward.h"
#include "util/error.h"

namespace bicache::engine {

PrefixBuild::PrefixBuild(const model::Model& model, std::vector<int32_t> prefix, int layers)
    : model_(model), tokens_(std::move(prefix)), payload_(std::make_shared<PrefixKvPayload>()) {
  const int L = model.config().n_layer;
  layers_ = payload_->layers_held = std::clamp(layers, 0, L);
  payload_->kv.Reset(L, static_cast<int>(tokens_.size()));
}

void PrefixBuild::AdvanceTogether(std::span<PrefixBuild* const> builds, int count,
                                  model::ForwardStats* stats) {
  if (builds.empty()) return;
  const int first = builds[0]->next_layer_;
  int last = first + std::max(1, count);
  std::vector<model::LayerChunk> chunks;
  for (PrefixBuild* b : builds) {
    if (b->next_layer_ != first || b->done())
      throw Error(ErrorKind::kInternal, "PrefixBuild::AdvanceTogether: builds out of step");
    if (!b->payload_) throw Error(ErrorKind::kInternal, "PrefixBuild: advanced after Take");
    last = std::min(last, b->layers_);
    // A block-diffusion entry is reused at every layer, exactly: no request rejoins from a hidden
    // state, so none is kept.
    const bool rejoins = !b->model_.config().block_causal();
    chunks.push_back({b->tokens_, &b->hidden_, &b->payload_->kv, b->payload_->layers_held,
                      rejoins ? b->payload_->layers_held : 0});
  }
  model::ForwardLayers(builds[0]->model_, chunks, first, last, stats);
  for (PrefixBuild* b : builds) b->next_layer_ = last;
}

std::shared_ptr<PrefixKvPayload> PrefixBuild::Take() {
  if (!done() || !payload_)
    throw Error(ErrorKind::kInternal, "PrefixBuild::Take before the build is done, or twice");
  const int L = model_.config().n_layer;
  if (payload_->layers_held == L) payload_->kv.hidden[L].clear();  // never a rejoin point
  for (auto& h : payload_->kv.hidden) h.shrink_to_fit();
  hidden_ = std::vector<float>();
  return std::move(payload_);
}

std::shared_ptr<PrefixKvPayload> BuildPrefixPayload(const model::Model& model,
                                                    std::span<const int32_t> prefix, int layers,
                                                    model::ForwardStats* stats) {
  PrefixBuild b(model, std::vector<int32_t>(prefix.begin(), prefix.end()), layers);
  PrefixBuild* one = &b;
  if (!b.done()) PrefixBuild::AdvanceTogether({&one, 1}, b.layers(), stats);
  return b.Take();
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
