// `bicache calibrate`'s printout: the per-bin curves (K/V similarity by layer, or agreement with
// `none` and accuracy by reuse depth), each bin's own depth, and the table's step function.
#pragma once

#include <cstdio>
#include <string>

#include "harness/calibrate_run.h"

namespace bicache::harness {

// `saved_to`: where the table was written (printed last).
void PrintCalibrateText(std::FILE* out, const CalibrateReport& report,
                        const std::string& model_path, const std::string& saved_to);

}  // namespace bicache::harness
