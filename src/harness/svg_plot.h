// `bicache bench --svg`: throughput vs accuracy per cache mode, the trade-off (speed-up over none
// against paired delta accuracy with its 95% interval, per ratio band) when `none` ran, and the
// depth table's calibration curves, as one self-contained SVG; `bicache calibrate --svg`: the
// curves alone.
#pragma once

#include <string>
#include <vector>

#include "engine/depth_table.h"

namespace bicache::harness {

struct PlotPoint {
  std::string label;
  double x, y;  // canvas tokens/s, accuracy
};

// One mode in one scope against `none` on the same requests (harness/bench_report.h).
struct TradeoffPoint {
  std::string label;     // mode name
  std::string band;      // "all", "short" or "long"
  double speedup;        // canvas tokens/s over none's
  double delta, lo, hi;  // accuracy - none's, in points, and its paired 95% interval
  bool keeps;            // the targets' accuracy rule holds (delta >= -1, lo >= -2)
};

// `v` with `prec` significant digits, as an ostream writes it (no trailing zeros).
std::string Num(double v, int prec = 3);

// Throws Error(kIo) naming --svg when the file cannot be written.
// `tradeoff` empty: two panels (throughput/accuracy, calibration); else the trade-off panel
// (id 'tradeoff', one error bar of class 'errbar' per point) sits between them.
void WriteBenchSvg(const std::string& path, const std::vector<PlotPoint>& points,
                   const std::vector<TradeoffPoint>& tradeoff, const engine::DepthTable& table,
                   const std::string& caption);

// `bicache calibrate --svg`: the table's curves alone (similarity by layer, or agreement with
// none by reuse depth for criterion answers). Throws Error(kIo) naming --svg.
void WriteCalibrationSvg(const std::string& path, const engine::DepthTable& table,
                         const std::string& caption);

}  // namespace bicache::harness
