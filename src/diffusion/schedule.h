// How many masked positions each denoising step commits, for both reference schedules.
#pragma once

#include <vector>

namespace bicache::diffusion {

// LLaDA `get_num_transfer_tokens`: `masked` tokens spread over `steps` steps as evenly as
// possible, the remainder going to the first steps (base = masked / steps; the first
// masked % steps steps get one more). Sums to `masked`.
std::vector<int> LladaTransferCounts(int masked, int steps);

// Dream's `torch.linspace(1, eps, steps + 1)` in float32, reproducing PyTorch's kernel (float
// step; the first half counts up from 1, the second half down from eps) so that the truncating
// transfer counts below round exactly as the reference does.
std::vector<float> DreamTimesteps(int steps, float eps);

// Dream's count for step i (t = ts[i], s = ts[i + 1]): int(masked * (1 - s / t)) evaluated in
// float32 as PyTorch does; every remaining masked position on the last step.
int DreamTransferCount(int masked, float t, float s, bool last_step);

// Dream `origin`: probability that a masked position is committed at this step (1 on the last).
float DreamTransferProbability(float t, float s, bool last_step);

}  // namespace bicache::diffusion
