#include "engine/threads.h"

#include <omp.h>

#include <cstdlib>

namespace bicache::engine {

int ForwardThreads(int requested, const model::ModelConfig& config) {
  if (requested > 0) return requested;
  // A user's OMP_NUM_THREADS is an explicit choice too; larger models keep OpenMP's default.
  if (std::getenv("OMP_NUM_THREADS") != nullptr || config.d_model > kSmallModelDim) return 0;
  return 1;
}

void UseThreads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

}  // namespace bicache::engine
