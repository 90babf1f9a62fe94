#include "engine/threads.h"

#include <omp.h>

namespace bicache::engine {

int ForwardThreads(int requested, const model::ModelConfig& config) {
  if (requested > 0) return requested;
  return config.d_model <= kSmallModelDim ? 1 : omp_get_num_procs();
}

void UseThreads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

}  // namespace bicache::engine
