#pragma once
// NCCL collectives on CUDA tensors, for GPU nodes. Built only where CUDA and NCCL were found
// (TESSERA_HAVE_CUDA); elsewhere CreateNcclCommunicator says so. The NCCL unique id travels
// through the c10d store; operations run on the default CUDA stream, ordered with LibTorch's.

#include <memory>

#include "absl/status/statusor.h"
#include "worker/engine/dist/communicator.h"

namespace tessera::engine {

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size);

}  // namespace tessera::engine
