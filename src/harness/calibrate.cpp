#include "harness/calibrate.h"

#include <cmath>
#include <map>

#include "util/error.h"
#include "util/field_error.h"

namespace bicache::harness {

int RatioBinPct(double ratio, int bin_pct) {
  return static_cast<int>(std::floor(ratio * 100.0 / bin_pct)) * bin_pct;
}

void CheckRatioBinPct(int bin_pct) {
  if (bin_pct < 1 || bin_pct > 50)
    throw FieldError(ErrorKind::kInvalidArgument, "{bin} must be in [1, 50] percent");
}

engine::DepthTable Calibrate(const model::Model& model,
                             const std::vector<CalibrationSample>& samples, double threshold,
                             int bin_pct, const std::function<void(size_t, size_t)>& progress) {
  if (!(threshold > 0 && threshold < 1)) {
    throw FieldError(ErrorKind::kInvalidArgument, "{threshold} must be in (0, 1)");
  }
  CheckRatioBinPct(bin_pct);
  const int L = model.config().n_layer;
  std::map<int, engine::CalibrationBin> bins;
  for (size_t i = 0; i < samples.size(); ++i) {
    const CalibrationSample& s = samples[i];
    const double ratio = static_cast<double>(s.prefix_len) / s.tokens.size();
    const int bin = RatioBinPct(ratio, bin_pct);
    std::vector<double> sim = engine::PrefixKvSimilarity(model, s.tokens, s.prefix_len);
    engine::CalibrationBin& b = bins[bin];
    b.ratio_pct = bin;
    if (b.similarity.empty()) b.similarity.assign(L, 0.0);
    for (int l = 0; l < L; ++l) b.similarity[l] += sim[l];
    b.samples++;
    if (progress) progress(i + 1, samples.size());
  }
  std::vector<engine::CalibrationBin> out;
  for (auto& [r, b] : bins) {
    for (double& v : b.similarity) v /= b.samples;
    out.push_back(b);
  }
  return engine::DepthTable::FromBins(std::move(out), threshold, L);
}

}  // namespace bicache::harness
