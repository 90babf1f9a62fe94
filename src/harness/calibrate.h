// Calibration of the BiCache depth table (see engine/depth_table.h for the ratio definition).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/depth_table.h"
#include "engine/prefix_similarity.h"
#include "model/weights.h"

namespace bicache::harness {

// One calibration request: the whole forward's tokens (prefix + rest of the prompt + the mask
// canvas) and where the shared prefix ends.
struct CalibrationSample {
  std::vector<int32_t> tokens;
  int prefix_len = 0;
};

// The bin (its lower edge, integer percent) of prefix ratio r in bins `bin_pct` wide.
int RatioBinPct(double ratio, int bin_pct);

// Throws FieldError naming {bin} unless 1 <= bin_pct <= 50 (both criteria's bin width).
void CheckRatioBinPct(int bin_pct);

// Measures every sample, bins by ratio (bin_pct wide bins of integer percent) and derives the
// table. `progress(i, n)` is called after each sample (optional).
engine::DepthTable Calibrate(const model::Model& model,
                             const std::vector<CalibrationSample>& samples, double threshold,
                             int bin_pct, const std::function<void(size_t, size_t)>& progress = {});

}  // namespace bicache::harness
