// The prefix K/V similarity measurement (engine/depth_table.h defines the ratio it is binned by).
#pragma once

#include <cstdint>
#include <vector>

#include "model/weights.h"

namespace bicache::engine {

// Per layer, the mean token-wise cosine similarity of the prefix's K rows (heads flattened) and V
// rows computed from the prefix alone vs inside `tokens`, K and V averaged. [n_layer]
std::vector<double> PrefixKvSimilarity(const model::Model& model,
                                       const std::vector<int32_t>& tokens, int prefix_len);

}  // namespace bicache::engine
