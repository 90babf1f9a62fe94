// How many OpenMP threads a model's forwards use by default.
//
// Every layer of a forward has about ten parallel regions (oneDNN's matmuls plus the row loops);
// with passive waiting each one wakes the other threads. For a small model (d_model <= 512) a
// forward is a millisecond or two of work, and on the 2-vCPU VM of docs/benchmarks.md the wake-ups
// cost more than the second thread saves: the embedded model ran 1.5-3.5x faster on one thread in
// every cache mode. Larger models keep every core.
#pragma once

#include "model/config.h"

namespace bicache::engine {

constexpr int kSmallModelDim = 512;

// `requested` > 0 is taken as is. Without it: 1 for a small model unless OMP_NUM_THREADS is set;
// otherwise 0, which leaves OpenMP's default (OMP_NUM_THREADS, else every core).
int ForwardThreads(int requested, const model::ModelConfig& config);

// Sets the OpenMP team size of the calling thread's later parallel regions (the setting is per
// thread: a worker thread must call it itself). n <= 0 leaves the default.
void UseThreads(int n);

}  // namespace bicache::engine
