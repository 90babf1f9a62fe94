#include "engine/depth_table.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace bicache::engine {

int DepthTable::BinDepth(const std::vector<double>& similarity, double threshold, int n_layer) {
  int d = 0;
  while (d < static_cast<int>(similarity.size()) && d < n_layer && similarity[d] > threshold) ++d;
  // d leading layers are similar. Serving at depth b rejoins the prefix at layer b from its cached
  // (prefix-alone) hidden state, so layer b's prefix K/V are the prefix-alone ones too: depth b is
  // safe only when layers 0..b all are, i.e. b = d - 1 (or every layer, when all of them are).
  return d >= n_layer ? n_layer : std::max(0, d - 1);
}

DepthTable DepthTable::FromBins(std::vector<CalibrationBin> bins, double threshold, int n_layer) {
  DepthTable t;
  t.threshold_ = threshold;
  t.n_layer_ = n_layer;
  std::erase_if(bins, [](const CalibrationBin& b) { return b.samples <= 0; });
  std::sort(bins.begin(), bins.end(),
            [](const auto& a, const auto& b) { return a.ratio_pct < b.ratio_pct; });
  std::vector<int> depth(bins.size());
  for (size_t i = 0; i < bins.size(); ++i)
    depth[i] = BinDepth(bins[i].similarity, threshold, n_layer);
  // Conservative envelope: walk from the highest ratio down, keeping the running minimum.
  for (int i = static_cast<int>(bins.size()) - 2; i >= 0; --i)
    depth[i] = std::min(depth[i], depth[i + 1]);
  int last = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    if (depth[i] > last) {
      t.points_.push_back({bins[i].ratio_pct, depth[i]});
      last = depth[i];
    }
  }
  t.bins_ = std::move(bins);
  return t;
}

int DepthTable::Lookup(double ratio) const {
  if (!(ratio >= 0)) return 0;  // NaN or negative
  const double pct = ratio * 100.0;
  int depth = 0;
  for (const DepthPoint& p : points_) {
    if (p.ratio_pct <= pct + 1e-9) depth = p.depth;
  }
  return depth;
}

std::string DepthTable::PathForModel(const std::string& model_path) {
  return model_path + ".depth.json";
}

void DepthTable::Save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = "bicache-depth-table/1";
  j["ratio_definition"] = "prefix tokens / (prefix + rest of prompt + mask canvas) tokens";
  j["threshold"] = threshold_;
  j["n_layer"] = n_layer_;
  j["points"] = nlohmann::json::array();
  for (const auto& p : points_)
    j["points"].push_back({{"ratio_pct", p.ratio_pct}, {"depth", p.depth}});
  j["bins"] = nlohmann::json::array();
  for (const auto& b : bins_) {
    j["bins"].push_back(
        {{"ratio_pct", b.ratio_pct}, {"samples", b.samples}, {"similarity", b.similarity}});
  }
  std::ofstream f(path);
  f << j.dump(1) << "\n";
  if (!f) throw Error(ErrorKind::kIo, "cannot write depth table '" + path + "'");
}

DepthTable DepthTable::Load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(ErrorKind::kIo, "cannot open depth table '" + path + "'");
  DepthTable t;
  try {
    nlohmann::json j = nlohmann::json::parse(f);
    if (j.value("format", "") != "bicache-depth-table/1")
      throw std::runtime_error("unknown format tag");
    t.threshold_ = j.at("threshold").get<double>();
    t.n_layer_ = j.at("n_layer").get<int>();
    int last_ratio = -1, last_depth = 0;
    for (const auto& p : j.at("points")) {
      DepthPoint dp{p.at("ratio_pct").get<int>(), p.at("depth").get<int>()};
      if (dp.ratio_pct <= last_ratio || dp.ratio_pct > 100 || dp.depth <= last_depth ||
          dp.depth > t.n_layer_) {
        throw std::runtime_error(
            "points must have increasing ratio (0..100) and increasing depth (1..n_layer)");
      }
      last_ratio = dp.ratio_pct;
      last_depth = dp.depth;
      t.points_.push_back(dp);
    }
    for (const auto& b : j.value("bins", nlohmann::json::array())) {
      t.bins_.push_back({b.at("ratio_pct").get<int>(), b.at("samples").get<int>(),
                         b.at("similarity").get<std::vector<double>>()});
    }
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kFormat, "depth table '" + path + "' is malformed: " + e.what());
  }
  return t;
}

int LayersHeldFor(const CacheMode& mode, const DepthTable& table, int n_layer) {
  switch (mode.prefix) {
    case PrefixReuse::kNone:
      return 0;
    case PrefixReuse::kLlm:
      return n_layer;
    case PrefixReuse::kFixed:
      return std::min(mode.fixed_depth, n_layer);
    case PrefixReuse::kBicache:
      return std::min(table.max_depth(), n_layer);
  }
  return 0;
}

int DepthFor(const CacheMode& mode, const DepthTable& table, int n_layer, double ratio) {
  if (mode.prefix == PrefixReuse::kBicache) return std::min(table.Lookup(ratio), n_layer);
  return LayersHeldFor(mode, table, n_layer);
}

}  // namespace bicache::engine
