#pragma once
// Registration of a family that cannot fail in a correct build: it fails only when its name is
// taken by a family of another shape (type, help, labels), a programming error that aborts at
// start, not a condition to handle.

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "absl/status/statusor.h"

namespace tessera::metrics {

template <typename T>
T* MustRegister(absl::StatusOr<T*> family) {
  if (!family.ok()) {
    spdlog::critical("metrics: {}", family.status().ToString());
    std::abort();
  }
  return *family;
}

}  // namespace tessera::metrics
