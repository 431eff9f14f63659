#include "worker/engine/dist/nccl_communicator.h"

#include <cstring>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/strings/str_cat.h"

#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace tessera::engine {

#ifdef TESSERA_HAVE_CUDA
namespace {

void Check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    throw std::runtime_error(absl::StrCat("nccl ", what, ": ", ncclGetErrorString(r)));
  }
}

ncclDataType_t NcclType(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32:
      return ncclFloat32;
    case torch::kFloat16:
      return ncclFloat16;
    case torch::kBFloat16:
      return ncclBfloat16;
    case torch::kInt64:
      return ncclInt64;
    case torch::kInt32:
      return ncclInt32;
    case torch::kFloat64:
      return ncclFloat64;
    default:
      throw std::runtime_error("nccl: unsupported tensor type");
  }
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  ~NcclCommunicator() override { ncclCommDestroy(comm_); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  void AllReduceSum(torch::Tensor& t) override {
    Check(ncclAllReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), NcclType(t),
                        ncclSum, comm_, nullptr),
          "all-reduce");
    Sync();
  }
  void AllGather(torch::Tensor& full) override {
    const int64_t part = full.numel() / size_;
    auto mine = full.narrow(0, rank_ * part, part);
    Check(ncclAllGather(mine.data_ptr(), full.data_ptr(), static_cast<size_t>(part), NcclType(full),
                        comm_, nullptr),
          "all-gather");
    Sync();
  }
  void ReduceScatterSum(torch::Tensor& full, torch::Tensor& part) override {
    Check(ncclReduceScatter(full.data_ptr(), part.data_ptr(), static_cast<size_t>(part.numel()),
                            NcclType(full), ncclSum, comm_, nullptr),
          "reduce-scatter");
    Sync();
  }
  void Broadcast(torch::Tensor& t, int root) override {
    Check(ncclBroadcast(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), NcclType(t),
                        root, comm_, nullptr),
          "broadcast");
    Sync();
  }
  void ReduceSum(torch::Tensor& t, int root) override {
    Check(ncclReduce(t.data_ptr(), t.data_ptr(), static_cast<size_t>(t.numel()), NcclType(t),
                     ncclSum, root, comm_, nullptr),
          "reduce");
    Sync();
  }
  // NCCL has no all-to-all of its own: a send and a receive to every peer, in one group.
  void AllToAll(torch::Tensor& output, torch::Tensor& input,
                const std::vector<int64_t>& output_splits,
                const std::vector<int64_t>& input_splits) override {
    int64_t row = 1;  // elements per row, from the trailing dimensions (a side may have none)
    for (int64_t d = 1; d < input.dim(); ++d) row *= input.size(d);
    const size_t bytes = static_cast<size_t>(row) * input.element_size();
    auto* in = static_cast<char*>(input.data_ptr());
    auto* out = static_cast<char*>(output.data_ptr());
    Check(ncclGroupStart(), "group start");
    int64_t sent = 0, received = 0;
    for (int peer = 0; peer < size_; ++peer) {
      const auto send = static_cast<size_t>(input_splits[static_cast<size_t>(peer)]);
      const auto recv = static_cast<size_t>(output_splits[static_cast<size_t>(peer)]);
      Check(ncclSend(in + sent, send * static_cast<size_t>(row), NcclType(input), peer, comm_,
                     nullptr),
            "send");
      Check(ncclRecv(out + received, recv * static_cast<size_t>(row), NcclType(output), peer, comm_,
                     nullptr),
            "recv");
      sent += static_cast<int64_t>(send * bytes);
      received += static_cast<int64_t>(recv * bytes);
    }
    Check(ncclGroupEnd(), "group end");
    Sync();
  }
  void Barrier() override {
    auto one = torch::ones({1}, torch::TensorOptions().device(torch::kCUDA));
    AllReduceSum(one);
  }

 private:
  // Collectives here are synchronous, like the Gloo ones: a failure shows up at its call.
  void Sync() {
    if (cudaStreamSynchronize(nullptr) != cudaSuccess) throw std::runtime_error("cuda sync failed");
  }
  ncclComm_t comm_;
  int rank_, size_;
};

}  // namespace

bool NcclAvailable() { return true; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
  try {
    ncclUniqueId id;
    if (rank == 0) {
      Check(ncclGetUniqueId(&id), "get unique id");
      store->set("nccl_id", std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id),
                                                 reinterpret_cast<uint8_t*>(&id) + sizeof id));
    } else {
      const auto bytes = store->get("nccl_id");
      if (bytes.size() != sizeof id) throw std::runtime_error("nccl: bad unique id in the store");
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    ncclComm_t comm;
    Check(ncclCommInitRank(&comm, size, id, rank), "init");
    return std::unique_ptr<Communicator>(new NcclCommunicator(comm, rank, size));
  } catch (const std::exception& e) {
    return absl::UnavailableError(e.what());
  }
}

#else

bool NcclAvailable() { return false; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>&, int, int) {
  return absl::FailedPreconditionError(
      "NCCL was not available when this tessera-train was built (no CUDA/NCCL in /usr/local/cuda)");
}

#endif

}  // namespace tessera::engine
