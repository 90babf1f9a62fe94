// How much a shared prefix's K/V changes when the rest of the request follows it: the measurement
// behind both the depth table (harness/calibrate.h) and the engine's reuse audit.
#include "engine/prefix_similarity.h"

#include <cmath>
#include <span>

#include "model/forward.h"
#include "util/error.h"

namespace bicache::engine {
namespace {

// Mean over rows of cos(a_row, b_row); rows of width w.
double MeanRowCosine(const float* a, const float* b, int rows, int w) {
  double total = 0;
  for (int r = 0; r < rows; ++r) {
    double dot = 0, na = 0, nb = 0;
    for (int i = 0; i < w; ++i) {
      const double x = a[static_cast<size_t>(r) * w + i], y = b[static_cast<size_t>(r) * w + i];
      dot += x * y;
      na += x * x;
      nb += y * y;
    }
    total += (na > 0 && nb > 0) ? dot / std::sqrt(na * nb) : (na == nb ? 1.0 : 0.0);
  }
  return rows > 0 ? total / rows : 1.0;
}

model::SeqKv CaptureKv(const model::Model& m, std::span<const int32_t> tokens) {
  model::SeqKv kv;
  kv.Reset(m.config().n_layer, static_cast<int>(tokens.size()));
  model::SeqPlan p;
  p.tokens = tokens;
  p.kv_out = &kv;
  p.capture_kv_layers = m.config().n_layer;
  model::Forward(m, {&p, 1});
  return kv;
}

}  // namespace

std::vector<double> PrefixKvSimilarity(const model::Model& model,
                                       const std::vector<int32_t>& tokens, int prefix_len) {
  if (prefix_len <= 0 || prefix_len > static_cast<int>(tokens.size())) {
    throw Error(ErrorKind::kInvalidArgument,
                "calibration sample: prefix length " + std::to_string(prefix_len) +
                    " outside the sample's " + std::to_string(tokens.size()) + " tokens");
  }
  const std::span<const int32_t> all(tokens);
  const model::SeqKv alone = CaptureKv(model, all.first(prefix_len));
  const model::SeqKv full = CaptureKv(model, all);
  const int L = model.config().n_layer, w = model.config().kv_dim();
  std::vector<double> sim(L);
  for (int l = 0; l < L; ++l) {
    const double k =
        MeanRowCosine(alone.layers[l].k.data(), full.layers[l].k.data(), prefix_len, w);
    const double v =
        MeanRowCosine(alone.layers[l].v.data(), full.layers[l].v.data(), prefix_len, w);
    sim[l] = 0.5 * (k + v);
  }
  return sim;
}

}  // namespace bicache::engine
