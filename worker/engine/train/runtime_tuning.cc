#include "worker/engine/train/runtime_tuning.h"

#include <malloc.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace tessera::engine {

void TuneAllocatorForTraining() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_TOP_PAD, 256 << 20);
}

void EnsurePassiveOpenMpWait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice, or done already
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);
}

}  // namespace tessera::engine
