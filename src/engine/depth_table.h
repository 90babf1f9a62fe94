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
//
// A second criterion, "answers" (harness/calibrate_answers.h), measures per bin and per depth
// d = 0..n_layer how often a request served with `fixed:d` gives token-for-token the answer of
// `none` (agreement) and how often it is right (accuracy). A bin's depth is then the deepest d
// such that every depth 1..d keeps agreement >= the threshold and accuracy >= the bin's depth-0
// accuracy; the same envelope turns bin depths into the table.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "diffusion/sampler_config.h"
#include "engine/cache_mode.h"

namespace bicache::engine {

struct CalibrationBin {
  int ratio_pct = 0;  // bin: ratios in [ratio_pct, ratio_pct + bin width)
  int samples = 0;
  std::vector<double> similarity;  // [n_layer] mean cosine similarity of prefix K/V (K,V averaged)
  // Criterion "answers" only (empty otherwise), index = depth d in 0..n_layer:
  std::vector<double> agreement;  // [n_layer + 1] share of answers equal to depth 0's (none's)
  std::vector<double> accuracy;   // [n_layer + 1] share of right answers at depth d
  // Criterion "accuracy" only (empty otherwise): [n_layer + 1] the lower end of the paired 95%
  // interval of accuracy[d] - accuracy[0] (harness/paired_stats.h), 0 at depth 0.
  std::vector<double> accuracy_low;
};

// One bin as the table file (and bench's JSON) writes it: ratio_pct, samples, and whichever curves
// it has (similarity; agreement and accuracy).
nlohmann::json CalibrationBinJson(const CalibrationBin& bin);

// How a table's bins were measured: prefix K/V similarity (threshold = minimum similarity),
// answers (threshold = minimum agreement with `none`) or accuracy (threshold = the largest loss
// of accuracy against `none`, in points).
enum class DepthCriterion { kKvSimilarity, kAnswers, kAccuracy };
const char* DepthCriterionName(DepthCriterion c);  // "kv_similarity" / "answers" / "accuracy"
// Throws Error(kInvalidArgument) naming the value and the valid names.
DepthCriterion ParseDepthCriterion(std::string_view text);

// What a table was measured with (`calibrate` records it; files written before have none). An
// answers table holds for the generation it was measured with: depths safe with one block of 32
// changed 7-11% of the answers with blocks of 8 (docs/bicache.md, "Choosing the depth").
struct CalibrationSettings {
  std::string suite;      // the samples' file, as given to calibrate
  int samples = 0;        // samples measured
  int gen_length = 0;     // mask canvas appended to each sample
  int steps = -1;         // answers only (-1 = not a generation setting of this table):
  int block_length = -1;  //   denoising steps, block length and the fixed:D modes' refresh
  int refresh = -1;       //   interval the answers were generated with
};
nlohmann::json CalibrationSettingsJson(const CalibrationSettings& s);
// "240 samples of tests/data/suite/calibration.jsonl, gen 32, steps 32, block 32, refresh 8"
std::string DescribeCalibration(const CalibrationSettings& s);

struct DepthPoint {
  int ratio_pct = 0;
  int depth = 0;
};

class DepthTable {
 public:
  DepthTable() = default;
  // Derives the table from measured bins (any order). bins with no samples are ignored.
  static DepthTable FromBins(std::vector<CalibrationBin> bins, double threshold, int n_layer);
  // Criterion "answers": bins carry agreement and accuracy; bins with fewer than `min_samples`
  // samples are dropped (too few answers to decide; their ratios use the nearest lower point).
  // Criterion "accuracy" the same, with accuracy_low, and `min_agreement` read as max_drop.
  static DepthTable FromAnswerBins(std::vector<CalibrationBin> bins, double min_agreement,
                                   int n_layer, int min_samples,
                                   DepthCriterion criterion = DepthCriterion::kAnswers);
  // One bin's safe depth (before the monotone envelope): layers 0..b must all exceed the threshold,
  // since the prefix rejoins at layer b from its prefix-alone hidden state; all layers -> n_layer.
  static int BinDepth(const std::vector<double>& similarity, double threshold, int n_layer);
  // Criterion "answers": the deepest d such that every depth 1..d has agreement >= min_agreement
  // and accuracy >= accuracy[0] (depth 0 is `none` itself).
  static int AnswerBinDepth(const CalibrationBin& bin, double min_agreement, int n_layer);
  // Criterion "accuracy" (the BiCache paper's): the deepest d such that every depth 1..d loses at
  // most `max_drop` points of accuracy against depth 0 and the lower end of its paired 95%
  // interval is at least -2 x max_drop points.
  static int AccuracyBinDepth(const CalibrationBin& bin, double max_drop, int n_layer);
  // The criterion's depth of one bin with its threshold (min similarity, min agreement or max
  // drop): what DepthOfBin and FromAnswerBins apply, and what calibration stops on.
  static int CriterionBinDepth(const CalibrationBin& bin, DepthCriterion criterion,
                               double threshold, int n_layer);
  // This table's criterion applied to one of its bins (what `calibrate` prints per bin).
  int DepthOfBin(const CalibrationBin& bin) const;
  // JSON file; Load throws Error(kIo / kFormat) naming the path and the problem.
  static DepthTable Load(const std::string& path);
  void Save(const std::string& path) const;
  // The table's conventional location next to a model file, per depth profile: "" or "safe"
  // MODEL.depth.json, "fast" MODEL.depth.fast.json; any other profile is itself a table's path.
  static std::string PathForModel(const std::string& model_path, const std::string& profile = "");

  int Lookup(double ratio) const;  // safe depth for prefix ratio r in [0, 1]
  int max_depth() const { return points_.empty() ? 0 : points_.back().depth; }
  double threshold() const { return threshold_; }
  DepthCriterion criterion() const { return criterion_; }
  int n_layer() const { return n_layer_; }
  const std::vector<DepthPoint>& points() const { return points_; }
  const std::vector<CalibrationBin>& bins() const { return bins_; }
  bool empty() const { return points_.empty(); }
  // How the bins were measured; nullopt for a table file that does not say.
  const std::optional<CalibrationSettings>& calibrated_with() const { return calibrated_with_; }
  void set_calibrated_with(CalibrationSettings s) { calibrated_with_ = std::move(s); }
  // The model's widths the table was measured on (0 = the file does not say): with n_layer, what
  // tells a table of another model (LoadedModel::LoadDepthTable).
  int d_model() const { return d_model_; }
  int n_vocab() const { return n_vocab_; }
  void set_model_shape(int d_model, int n_vocab) {
    d_model_ = d_model;
    n_vocab_ = n_vocab;
  }

 private:
  std::vector<DepthPoint> points_;  // ratio ascending, depth strictly increasing, depth >= 1
  std::vector<CalibrationBin> bins_;
  double threshold_ = 0.97;
  int n_layer_ = 0;
  int d_model_ = 0, n_vocab_ = 0;
  DepthCriterion criterion_ = DepthCriterion::kKvSimilarity;
  std::optional<CalibrationSettings> calibrated_with_;

  // The envelope of per-bin depths (bins sorted by ratio, depth[i] for bins[i]) as points.
  static DepthTable FromBinDepths(std::vector<CalibrationBin> bins, std::vector<int> depth,
                                  double threshold, int n_layer, DepthCriterion criterion);
};

// A depth profile as --depth-profile takes it: "safe" (or ""), "fast", or a table file's path.
// Throws Error(kInvalidArgument) naming the flag for a fast profile whose table is not next to
// `model_path`, or a name that is neither a profile nor an existing file.
void CheckDepthProfile(const std::string& model_path, const std::string& profile);

// Empty when `table` does not say how its answers were generated, or says the same as `sampler` and
// `refresh`; else one sentence naming what differs (gen length, steps, block length, refresh), for
// a warning: an answers table's depths need not hold for another generation.
std::string CalibrationMismatch(const DepthTable& table, const diffusion::SamplerConfig& sampler,
                                int refresh);

// The depth choice, model-free (the engine passes its model's n_layer).
// How many layers a prefix entry must hold to serve `mode`: none 0, llm every layer, fixed:B B,
// bicache the table's maximum depth (each capped at n_layer). Entries are stored per this value.
int LayersHeldFor(const CacheMode& mode, const DepthTable& table, int n_layer);
// The reuse depth a request of `mode` gets at prefix ratio `ratio`: bicache looks the ratio up in
// the table, every other mode reuses all the layers its entries hold.
int DepthFor(const CacheMode& mode, const DepthTable& table, int n_layer, double ratio);

}  // namespace bicache::engine
