// The BiCache depth table: prefix ratio -> safe reuse depth.
//
// Ratio definition, used by calibration and serving alike:
//     r = prefix tokens / all tokens of the forward (prefix + rest of the prompt + mask canvas)
// Calibration measures, per ratio bin (integer percent) and per layer, the mean token-wise cosine
// similarity between the prefix's K/V computed from the prefix alone and inside the full request
// (canvas included). A bin's depth is the number of leading layers whose similarity exceeds the
// threshold. The table is the conservative monotone envelope of those depths,
//     b(r) = min over bins with ratio >= r of depth(bin),
// stored as the points where it increases. Lookup takes the largest point <= r; a ratio below the
// first point gets depth 0 (no reuse) — never an error.
#pragma once

#include <string>
#include <vector>

#include "engine/cache_mode.h"

namespace bicache::engine {

struct CalibrationBin {
  int ratio_pct = 0;  // bin: ratios in [ratio_pct, ratio_pct + bin width)
  int samples = 0;
  std::vector<double> similarity;  // [n_layer] mean cosine similarity of prefix K/V (K,V averaged)
};

struct DepthPoint {
  int ratio_pct = 0;
  int depth = 0;
};

class DepthTable {
 public:
  DepthTable() = default;
  // Derives the table from measured bins (any order). bins with no samples are ignored.
  static DepthTable FromBins(std::vector<CalibrationBin> bins, double threshold, int n_layer);
  // One bin's safe depth (before the monotone envelope): layers 0..b must all exceed the threshold,
  // since the prefix rejoins at layer b from its prefix-alone hidden state; all layers -> n_layer.
  static int BinDepth(const std::vector<double>& similarity, double threshold, int n_layer);
  // JSON file; Load throws Error(kIo / kFormat) naming the path and the problem.
  static DepthTable Load(const std::string& path);
  void Save(const std::string& path) const;
  // The table's conventional location next to a model file.
  static std::string PathForModel(const std::string& model_path);

  int Lookup(double ratio) const;  // safe depth for prefix ratio r in [0, 1]
  int max_depth() const { return points_.empty() ? 0 : points_.back().depth; }
  double threshold() const { return threshold_; }
  int n_layer() const { return n_layer_; }
  const std::vector<DepthPoint>& points() const { return points_; }
  const std::vector<CalibrationBin>& bins() const { return bins_; }
  bool empty() const { return points_.empty(); }

 private:
  std::vector<DepthPoint> points_;  // ratio ascending, depth strictly increasing, depth >= 1
  std::vector<CalibrationBin> bins_;
  double threshold_ = 0.97;
  int n_layer_ = 0;
};

// The depth choice, model-free (the engine passes its model's n_layer).
// How many layers a prefix entry must hold to serve `mode`: none 0, llm every layer, fixed:B B,
// bicache the table's maximum depth (each capped at n_layer). Entries are stored per this value.
int LayersHeldFor(const CacheMode& mode, const DepthTable& table, int n_layer);
// The reuse depth a request of `mode` gets at prefix ratio `ratio`: bicache looks the ratio up in
// the table, every other mode reuses all the layers its entries hold.
int DepthFor(const CacheMode& mode, const DepthTable& table, int n_layer, double ratio);

}  // namespace bicache::engine
