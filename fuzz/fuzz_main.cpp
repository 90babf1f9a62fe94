// libFuzzer driver: one binary per entry point, chosen at compile time (fuzz/CMakeLists.txt).
#include <cstdint>
#include <cstdlib>

#include "targets.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // One OpenMP thread: the forward in the GGUF targets is tiny, and a thread pool per process
  // only adds noise to the fuzzer's timing.
  setenv("OMP_NUM_THREADS", "1", 0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bicache::fuzz::BICACHE_FUZZ_ENTRY(bicache::fuzz::Input(data, size));
  return 0;
}
