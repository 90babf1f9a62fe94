// Calibration of the BiCache depth table (see engine/depth_table.h for the ratio definition).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/depth_table.h"
#include "model/weights.h"

namespace bicache::engine {

// One calibration request: the whole forward's tokens (prefix + rest of the prompt + the mask
// canvas) and where the shared prefix ends.
struct CalibrationSample {
  std::vector<int32_t> tokens;
  int prefix_len = 0;
};

// Per layer, the mean token-wise cosine similarity of the prefix's K rows (heads flattened) and V
// rows computed from the prefix alone vs inside `tokens`, K and V averaged. [n_layer]
std::vector<double> PrefixKvSimilarity(const model::Model& model,
                                       const std::vector<int32_t>& tokens, int prefix_len);

// Measures every sample, bins by ratio (bin_pct wide bins of integer percent) and derives the
// table. `progress(i, n)` is called after each sample (optional).
DepthTable Calibrate(const model::Model& model, const std::vector<CalibrationSample>& samples,
                     double threshold, int bin_pct,
                     const std::function<void(size_t, size_t)>& progress = {});

}  // namespace bicache::engine
