#include "harness/calibrate_report.h"

namespace bicache::harness {
namespace {

// Kv: one row per bin, the similarity of each layer and the bin's own depth (before the
// monotone envelope, which the step function shows).
void PrintKvBins(std::FILE* out, const CalibrateReport& r) {
  const engine::DepthTable& t = r.table;
  std::fprintf(out, "%-8s %7s ", "ratio%", "samples");
  for (int l = 0; l < t.n_layer(); ++l)
    std::fprintf(out, " %6s", ("L" + std::to_string(l)).c_str());
  std::fprintf(out, " %6s\n", "depth");
  for (const engine::CalibrationBin& b : t.bins()) {
    std::fprintf(out, "%3d-%-4d %7d ", b.ratio_pct, b.ratio_pct + r.options.bin_pct, b.samples);
    for (double v : b.similarity) std::fprintf(out, " %6.3f", v);
    std::fprintf(out, " %6d\n", t.DepthOfBin(b));
  }
}

// Answers: per bin, agreement with none at each reuse depth d = 1..n_layer ("-": not run, the
// bin stopped at a shallower unsafe depth), then none's accuracy, the accuracy at the bin's own
// depth and that depth.
// Accuracy: per depth, the accuracy change against none in points and its interval's lower end.
void PrintAnswerBins(std::FILE* out, const CalibrateReport& r) {
  const engine::DepthTable& t = r.table;
  const bool acc = t.criterion() == engine::DepthCriterion::kAccuracy;
  std::fprintf(out, acc ? "accuracy change against none in points, and the lower end of its 95%% "
                          "interval, by reuse depth (d = layers reusing the cached prefix):\n"
                        : "agreement with none by reuse depth (d = layers reusing the cached "
                          "prefix):\n");
  std::fprintf(out, "%-8s %7s ", "ratio%", "samples");
  for (int d = 1; d <= t.n_layer(); ++d)
    std::fprintf(out, acc ? " %11s" : " %6s", ("d" + std::to_string(d)).c_str());
  std::fprintf(out, " %8s %8s %6s\n", "acc none", "acc at d", "depth");
  for (const engine::CalibrationBin& b : t.bins()) {
    std::fprintf(out, "%3d-%-4d %7d ", b.ratio_pct, b.ratio_pct + r.options.bin_pct, b.samples);
    for (int d = 1; d <= t.n_layer(); ++d) {
      const bool run = d < static_cast<int>(b.agreement.size());
      if (acc && run && d < static_cast<int>(b.accuracy_low.size())) {
        std::fprintf(out, " %+5.1f/%+5.1f", 100 * (b.accuracy[d] - b.accuracy[0]),
                     100 * b.accuracy_low[d]);
      } else if (run && !acc) {
        std::fprintf(out, " %6.3f", b.agreement[d]);
      } else {
        std::fprintf(out, acc ? " %11s" : " %6s", "-");
      }
    }
    const int depth = t.DepthOfBin(b);
    std::fprintf(out, " %8.3f %8.3f %6d\n", b.accuracy[0], b.accuracy[depth], depth);
  }
  std::fprintf(out,
               "none's accuracy over all %zu samples: %.3f; %zu requests generated (every depth "
               "for every sample: %zu); bins under %d samples are dropped and take the depth of "
               "the nearest lower bin\n",
               r.samples, r.none_accuracy, r.runs, r.samples * (t.n_layer() + 1),
               r.options.min_bin_samples);
}

}  // namespace

void PrintCalibrateText(std::FILE* out, const CalibrateReport& r, const std::string& model_path,
                        const std::string& saved_to) {
  const engine::DepthTable& t = r.table;
  const bool answers = t.criterion() != engine::DepthCriterion::kKvSimilarity;
  const char* what = t.criterion() == engine::DepthCriterion::kAnswers    ? "min agreement"
                     : t.criterion() == engine::DepthCriterion::kAccuracy ? "max drop (points)"
                                                                          : "threshold";
  std::fprintf(out, "model: %s (%d layers), %zu samples, criterion %s, %s %.3f, bins of %d%%\n",
               model_path.c_str(), t.n_layer(), r.samples,
               engine::DepthCriterionName(t.criterion()), what, t.threshold(), r.options.bin_pct);
  if (answers)
    PrintAnswerBins(out, r);
  else
    PrintKvBins(out, r);
  std::fprintf(out, "depth table (r = prefix / (prefix + prompt + canvas)):\n");
  if (t.empty()) {
    std::fprintf(out, "  every r: depth 0 (no ratio reaches a safe depth at this threshold)\n");
  } else {
    std::fprintf(out, "  r < %d%%: depth 0\n", t.points().front().ratio_pct);
    for (const engine::DepthPoint& p : t.points())
      std::fprintf(out, "  r >= %d%%: depth %d\n", p.ratio_pct, p.depth);
  }
  std::fprintf(out, "calibrated in %.1f s; saved to %s\n", r.seconds, saved_to.c_str());
}

}  // namespace bicache::harness
