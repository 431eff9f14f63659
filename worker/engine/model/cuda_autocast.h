#pragma once
// CUDA autocast's state, through whichever API the LibTorch has: 1.x's GPU-only calls, or the
// per-device calls that replaced them in 2.4 (the old ones deprecated there).

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace tessera::engine {

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline bool CudaAutocastEnabled() { return at::autocast::is_autocast_enabled(at::kCUDA); }
inline at::ScalarType CudaAutocastType() { return at::autocast::get_autocast_dtype(at::kCUDA); }
inline void SetCudaAutocast(bool enabled, at::ScalarType type) {
  at::autocast::set_autocast_dtype(at::kCUDA, type);
  at::autocast::set_autocast_enabled(at::kCUDA, enabled);
}
#else
inline bool CudaAutocastEnabled() { return at::autocast::is_enabled(); }
inline at::ScalarType CudaAutocastType() { return at::autocast::get_autocast_gpu_dtype(); }
inline void SetCudaAutocast(bool enabled, at::ScalarType type) {
  at::autocast::set_autocast_gpu_dtype(type);
  at::autocast::set_enabled(enabled);
}
#endif

}  // namespace tessera::engine
