#include "engine/depth_table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
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

nlohmann::json CalibrationBinJson(const CalibrationBin& b) {
  nlohmann::json bin = {{"ratio_pct", b.ratio_pct}, {"samples", b.samples}};
  if (!b.similarity.empty()) bin["similarity"] = b.similarity;
  if (!b.agreement.empty()) {
    bin["agreement"] = b.agreement;
    bin["accuracy"] = b.accuracy;
  }
  if (!b.accuracy_low.empty()) bin["accuracy_low"] = b.accuracy_low;
  return bin;
}

const char* DepthCriterionName(DepthCriterion c) {
  switch (c) {
    case DepthCriterion::kAnswers:
      return "answers";
    case DepthCriterion::kAccuracy:
      return "accuracy";
    case DepthCriterion::kKvSimilarity:
      break;
  }
  return "kv_similarity";
}

DepthCriterion ParseDepthCriterion(std::string_view text) {
  if (text == "kv_similarity") return DepthCriterion::kKvSimilarity;
  if (text == "answers") return DepthCriterion::kAnswers;
  if (text == "accuracy") return DepthCriterion::kAccuracy;
  throw Error(ErrorKind::kInvalidArgument, "unknown depth criterion '" + std::string(text) +
                                               "' (kv_similarity, answers or accuracy)");
}

int DepthTable::AnswerBinDepth(const CalibrationBin& bin, double min_agreement, int n_layer) {
  const int top = std::min<int>(n_layer, static_cast<int>(bin.agreement.size()) - 1);
  if (top < 1 || bin.accuracy.size() != bin.agreement.size()) return 0;
  // The same answers count with or without rounding noise: compare accuracies to 1e-12.
  int d = 0;
  while (d < top && bin.agreement[d + 1] >= min_agreement &&
         bin.accuracy[d + 1] >= bin.accuracy[0] - 1e-12)
    ++d;
  return d;
}

int DepthTable::AccuracyBinDepth(const CalibrationBin& bin, double max_drop, int n_layer) {
  const int top = std::min<int>(n_layer, static_cast<int>(bin.accuracy.size()) - 1);
  if (top < 1 || bin.accuracy_low.size() != bin.accuracy.size()) return 0;
  const double drop = max_drop / 100, eps = 1e-12;
  int d = 0;
  while (d < top && bin.accuracy[d + 1] >= bin.accuracy[0] - drop - eps &&
         bin.accuracy_low[d + 1] >= -2 * drop - eps)
    ++d;
  return d;
}

int DepthTable::CriterionBinDepth(const CalibrationBin& bin, DepthCriterion criterion,
                                  double threshold, int n_layer) {
  switch (criterion) {
    case DepthCriterion::kAnswers:
      return AnswerBinDepth(bin, threshold, n_layer);
    case DepthCriterion::kAccuracy:
      return AccuracyBinDepth(bin, threshold, n_layer);
    case DepthCriterion::kKvSimilarity:
      break;
  }
  return BinDepth(bin.similarity, threshold, n_layer);
}

int DepthTable::DepthOfBin(const CalibrationBin& bin) const {
  return CriterionBinDepth(bin, criterion_, threshold_, n_layer_);
}

DepthTable DepthTable::FromBinDepths(std::vector<CalibrationBin> bins, std::vector<int> depth,
                                     double threshold, int n_layer, DepthCriterion criterion) {
  DepthTable t;
  t.threshold_ = threshold;
  t.n_layer_ = n_layer;
  t.criterion_ = criterion;
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

namespace {

void SortAndDrop(std::vector<CalibrationBin>& bins, int min_samples) {
  std::erase_if(bins, [&](const CalibrationBin& b) { return b.samples < min_samples; });
  std::sort(bins.begin(), bins.end(),
            [](const auto& a, const auto& b) { return a.ratio_pct < b.ratio_pct; });
}

}  // namespace

DepthTable DepthTable::FromBins(std::vector<CalibrationBin> bins, double threshold, int n_layer) {
  SortAndDrop(bins, 1);
  std::vector<int> depth(bins.size());
  for (size_t i = 0; i < bins.size(); ++i)
    depth[i] = BinDepth(bins[i].similarity, threshold, n_layer);
  return FromBinDepths(std::move(bins), std::move(depth), threshold, n_layer,
                       DepthCriterion::kKvSimilarity);
}

DepthTable DepthTable::FromAnswerBins(std::vector<CalibrationBin> bins, double min_agreement,
                                      int n_layer, int min_samples, DepthCriterion criterion) {
  SortAndDrop(bins, std::max(1, min_samples));
  std::vector<int> depth(bins.size());
  for (size_t i = 0; i < bins.size(); ++i)
    depth[i] = CriterionBinDepth(bins[i], criterion, min_agreement, n_layer);
  return FromBinDepths(std::move(bins), std::move(depth), min_agreement, n_layer, criterion);
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

std::string DepthTable::PathForModel(const std::string& model_path, const std::string& profile) {
  if (profile.empty() || profile == "safe") return model_path + ".depth.json";
  if (profile == "fast") return model_path + ".depth.fast.json";
  return profile;
}

nlohmann::json CalibrationSettingsJson(const CalibrationSettings& s) {
  nlohmann::json j = {{"suite", s.suite}, {"samples", s.samples}, {"gen_length", s.gen_length}};
  if (s.steps >= 0) j["steps"] = s.steps;
  if (s.block_length >= 0) j["block_length"] = s.block_length;
  if (s.refresh >= 0) j["refresh"] = s.refresh;
  return j;
}

std::string DescribeCalibration(const CalibrationSettings& s) {
  std::string out = std::to_string(s.samples) + " samples of " + s.suite + ", gen " +
                    std::to_string(s.gen_length);
  if (s.steps >= 0) out += ", steps " + std::to_string(s.steps);
  if (s.block_length >= 0) out += ", block " + std::to_string(s.block_length);
  if (s.refresh >= 0) out += ", refresh " + std::to_string(s.refresh);
  return out;
}

void DepthTable::Save(const std::string& path) const {
  nlohmann::json j;
  j["format"] = "bicache-depth-table/1";
  j["ratio_definition"] = "prefix tokens / (prefix + rest of prompt + mask canvas) tokens";
  j["criterion"] = DepthCriterionName(criterion_);
  j["threshold"] = threshold_;
  j["n_layer"] = n_layer_;
  if (d_model_ > 0) j["d_model"] = d_model_;
  if (n_vocab_ > 0) j["n_vocab"] = n_vocab_;
  if (calibrated_with_) j["calibrated_with"] = CalibrationSettingsJson(*calibrated_with_);
  j["points"] = nlohmann::json::array();
  for (const auto& p : points_)
    j["points"].push_back({{"ratio_pct", p.ratio_pct}, {"depth", p.depth}});
  j["bins"] = nlohmann::json::array();
  for (const auto& b : bins_) j["bins"].push_back(CalibrationBinJson(b));
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
    t.criterion_ = ParseDepthCriterion(j.value("criterion", "kv_similarity"));
    t.threshold_ = j.at("threshold").get<double>();
    t.n_layer_ = j.at("n_layer").get<int>();
    t.d_model_ = j.value("d_model", 0);
    t.n_vocab_ = j.value("n_vocab", 0);
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
    if (j.contains("calibrated_with")) {
      const nlohmann::json& c = j.at("calibrated_with");
      CalibrationSettings cs{c.at("suite").get<std::string>(), c.at("samples").get<int>(),
                             c.at("gen_length").get<int>(),    c.value("steps", -1),
                             c.value("block_length", -1),      c.value("refresh", -1)};
      if (cs.samples < 0 || cs.gen_length < 1 || cs.steps < -1 || cs.block_length < -1 ||
          cs.refresh < -1)
        throw std::runtime_error("calibrated_with holds a negative count or a gen_length < 1");
      t.calibrated_with_ = std::move(cs);
    }
    using Doubles = std::vector<double>;
    for (const auto& b : j.value("bins", nlohmann::json::array())) {
      CalibrationBin bin{b.at("ratio_pct").get<int>(),     b.at("samples").get<int>(),
                         b.value("similarity", Doubles{}), b.value("agreement", Doubles{}),
                         b.value("accuracy", Doubles{}),   b.value("accuracy_low", Doubles{})};
      if (bin.agreement.size() != bin.accuracy.size())
        throw std::runtime_error("a bin's agreement and accuracy differ in length");
      if (!bin.accuracy_low.empty() && bin.accuracy_low.size() != bin.accuracy.size())
        throw std::runtime_error("a bin's accuracy_low and accuracy differ in length");
      t.bins_.push_back(std::move(bin));
    }
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kFormat, "depth table '" + path + "' is malformed: " + e.what());
  }
  return t;
}

void CheckDepthProfile(const std::string& model_path, const std::string& profile) {
  if (profile.empty() || profile == "safe") return;
  std::error_code ec;
  const std::string path = DepthTable::PathForModel(model_path, profile);
  if (std::filesystem::is_regular_file(path, ec)) return;
  if (profile == "fast") {
    throw Error(ErrorKind::kInvalidArgument,
                "--depth-profile fast: this model has no fast table (" + path +
                    "); `bicache calibrate --criterion accuracy` measures one");
  }
  throw Error(ErrorKind::kInvalidArgument, "--depth-profile '" + profile +
                                               "': neither a profile (safe, fast) nor a depth "
                                               "table file");
}

std::string CalibrationMismatch(const DepthTable& table, const diffusion::SamplerConfig& sampler,
                                int refresh) {
  const auto& c = table.calibrated_with();
  if (!c || c->block_length < 0) return "";
  std::string measured, here;
  auto differ = [&](const char* name, int was, int now) {
    if (was == now) return;
    measured += std::string(measured.empty() ? "" : ", ") + name + " " + std::to_string(was);
    here += std::string(here.empty() ? "" : ", ") + name + " " + std::to_string(now);
  };
  differ("gen", c->gen_length, sampler.gen_length);
  differ("steps", c->steps, sampler.steps);
  differ("block", c->block_length, sampler.block_length);
  differ("refresh", c->refresh, refresh);
  if (measured.empty()) return "";
  return "the depth table's answers were measured with " + measured + " (here: " + here +
         "): its depths may not keep the answers here; `bicache calibrate --criterion answers` "
         "with these settings measures a table for them";
}

int LayersHeldFor(const CacheMode& mode, const DepthTable& table, int n_layer) {
  switch (mode.prefix) {
    case PrefixReuse::kNone:
      return 0;
    case PrefixReuse::kLlm:
    case PrefixReuse::kExact:
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
