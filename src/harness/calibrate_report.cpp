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

// Answers: per bin, agreement with none at each reuse depth d = 1..n_layer, then none's accuracy,
// the accuracy at the bin's own depth and that depth.
void PrintAnswerBins(std::FILE* out, const CalibrateReport& r) {
  const engine::DepthTable& t = r.table;
  std::fprintf(out, "agreement with none by reuse depth (d = layers reusing the cached prefix):\n");
  std::fprintf(out, "%-8s %7s ", "ratio%", "samples");
  for (int d = 1; d <= t.n_layer(); ++d)
    std::fprintf(out, " %6s", ("d" + std::to_string(d)).c_str());
  std::fprintf(out, " %8s %8s %6s\n", "acc none", "acc at d", "depth");
  auto row = [&](const char* label, int samples, const std::vector<double>& agreement,
                 const std::vector<double>& accuracy, int depth) {
    std::fprintf(out, "%-8s %7d ", label, samples);
    for (size_t d = 1; d < agreement.size(); ++d) std::fprintf(out, " %6.3f", agreement[d]);
    std::fprintf(out, " %8.3f %8.3f %6s\n", accuracy[0], accuracy[std::max(0, depth)],
                 depth < 0 ? "-" : std::to_string(depth).c_str());
  };
  for (const engine::CalibrationBin& b : t.bins()) {
    char label[24];
    std::snprintf(label, sizeof label, "%d-%d", b.ratio_pct, b.ratio_pct + r.options.bin_pct);
    row(label, b.samples, b.agreement, b.accuracy, t.DepthOfBin(b));
  }
  if (!r.agreement.empty()) row("all", static_cast<int>(r.samples), r.agreement, r.accuracy, -1);
  std::fprintf(out,
               "(bins with fewer than %d samples are dropped; a dropped ratio takes the depth of "
               "the nearest lower bin)\n",
               r.options.min_bin_samples);
}

}  // namespace

void PrintCalibrateText(std::FILE* out, const CalibrateReport& r, const std::string& model_path,
                        const std::string& saved_to) {
  const engine::DepthTable& t = r.table;
  const bool answers = t.criterion() == engine::DepthCriterion::kAnswers;
  std::fprintf(out, "model: %s (%d layers), %zu samples, criterion %s, %s %.3f, bins of %d%%\n",
               model_path.c_str(), t.n_layer(), r.samples,
               engine::DepthCriterionName(t.criterion()), answers ? "min agreement" : "threshold",
               t.threshold(), r.options.bin_pct);
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
