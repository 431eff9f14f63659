#pragma once
// Process settings that make CPU training on LibTorch much faster, applied by tessera-train (and
// bench_engine) at start. Each was measured with bench_engine on a 2-core machine.
namespace tessera::engine {

// glibc's malloc returns freed blocks of a step's activations to the kernel (large blocks are
// mmapped, the heap's top is trimmed), so the next step faults every page in again: ~100,000
// page faults per step of a 4-layer model, a fifth of its time. This raises the mmap threshold
// to its maximum (32 MiB), never trims the heap and pads its growth. Call before training
// allocates.
void TuneAllocatorForTraining();

// LibTorch's OpenMP threads spin after each parallel region while the BLAS's own threads do the
// matrix products: on a busy machine the two pools fight for the cores (a 2-thread step took
// twice as long as with passive waiting). libgomp reads OMP_WAIT_POLICY when it loads, so when
// it is unset this sets it to PASSIVE and executes the program again (same pid); it returns only
// when nothing needs doing or the exec failed.
void EnsurePassiveOpenMpWait(char** argv);

}  // namespace tessera::engine
