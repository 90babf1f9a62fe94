// `bicache bench --svg`: throughput vs accuracy per cache mode, next to the depth table's
// calibration curves, as one self-contained SVG; `bicache calibrate --svg`: the curves alone.
#pragma once

#include <string>
#include <vector>

#include "engine/depth_table.h"

namespace bicache::harness {

struct PlotPoint {
  std::string label;
  double x, y;  // canvas tokens/s, accuracy
};

// `v` with `prec` significant digits, as an ostream writes it (no trailing zeros).
std::string Num(double v, int prec = 3);

// Throws Error(kIo) naming --svg when the file cannot be written.
void WriteBenchSvg(const std::string& path, const std::vector<PlotPoint>& points,
                   const engine::DepthTable& table, const std::string& caption);

// `bicache calibrate --svg`: the table's curves alone (similarity by layer, or agreement with
// none by reuse depth for criterion answers). Throws Error(kIo) naming --svg.
void WriteCalibrationSvg(const std::string& path, const engine::DepthTable& table,
                         const std::string& caption);

}  // namespace bicache::harness
