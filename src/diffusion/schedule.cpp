#include "diffusion/schedule.h"

#include "util/error.h"

namespace bicache::diffusion {

std::vector<int> LladaTransferCounts(int masked, int steps) {
  if (steps <= 0 || masked < 0) {
    throw Error(ErrorKind::kInternal, "LladaTransferCounts: steps must be > 0, masked >= 0");
  }
  std::vector<int> counts(steps, masked / steps);
  for (int i = 0; i < masked % steps; ++i) ++counts[i];
  return counts;
}

std::vector<float> DreamTimesteps(int steps, float eps) {
  if (steps <= 0) throw Error(ErrorKind::kInternal, "DreamTimesteps: steps must be > 0");
  const int n = steps + 1;  // linspace points
  const float start = 1.0f, end = eps;
  const float step = (end - start) / static_cast<float>(n - 1);
  const int halfway = n / 2;
  std::vector<float> ts(n);
  for (int i = 0; i < n; ++i) {
    // Written as two float32 operations each (no fused multiply-add), like the ATen kernel.
    if (i < halfway) {
      const float prod = step * static_cast<float>(i);
      ts[i] = start + prod;
    } else {
      const float prod = step * static_cast<float>(n - i - 1);
      ts[i] = end - prod;
    }
  }
  return ts;
}

int DreamTransferCount(int masked, float t, float s, bool last_step) {
  if (last_step) return masked;
  const float frac = 1.0f - s / t;
  const float n = static_cast<float>(masked) * frac;
  const int count = static_cast<int>(n);  // Python int() truncates toward zero
  return count < 0 ? 0 : (count > masked ? masked : count);
}

float DreamTransferProbability(float t, float s, bool last_step) {
  return last_step ? 1.0f : 1.0f - s / t;
}

}  // namespace bicache::diffusion
