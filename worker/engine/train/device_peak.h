#pragma once
// The peak FLOP/s that MFU divides by. GPUs: the vendor's figure for the model (model_flops.h).
// CPUs have no useful data-sheet figure, so the node's peak is measured once — fp32 matrix
// products on every core — and kept in a cache file (locked, so that the ranks starting on a
// node together measure once, alone).

#include <string>

#include "absl/status/statusor.h"

namespace tessera::engine {

// Intra-op threads for LibTorch and for the BLAS under it: Debian's LibTorch calls the system
// BLAS (OpenBLAS, see deploy/install-deps.sh), whose own thread pool torch::set_num_threads
// does not reach.
void SetComputeThreads(int threads);

// FLOP/s of square fp32 matrix products of size `n` on `threads` threads: the best of short
// intervals over ~`seconds`.
double MeasureMatmulFlops(int threads, int n, double seconds);

// The node's CPU peak from `cache_path`, measured and stored there when absent.
absl::StatusOr<double> CpuNodePeakFlops(const std::string& cache_path);

// $TESSERA_CACHE_DIR/cpu-peak.json, else ~/.cache/tessera/cpu-peak.json.
std::string DefaultPeakCachePath();

}  // namespace tessera::engine
