#pragma once
// Collectives for the engine and the canary, behind one small interface: Gloo (through c10d) on
// CPUs and NCCL on GPUs. Gloo in LibTorch 1.13 has no reduce-scatter, so its ReduceScatterSum is
// an all-reduce that keeps the rank's part; NCCL does the real thing.

#include <torch/torch.h>

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::engine {

// A collective started and not yet waited for. Its tensors must live until Wait returns.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void Wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  virtual void AllReduceSum(torch::Tensor& tensor) = 0;
  // All-reduces each part, at once where the backend can: Gloo runs each on a connection and
  // thread of its own (as many as the group was created with), so that one part's reduction
  // overlaps another's transfer. Each part's sum is the same as AllReduceSum's.
  virtual void AllReduceSumParts(std::vector<torch::Tensor>& parts) {
    for (auto& part : parts) AllReduceSum(part);
  }
  // `full` holds size() equal parts; this rank's part is `full`'s slice rank(). Afterwards every
  // part on every rank holds its owner's values.
  virtual void AllGather(torch::Tensor& full) = 0;
  // `full` holds this rank's contribution to every part; afterwards `part` holds the sum over
  // ranks of part rank(). `full`'s contents are not kept.
  virtual void ReduceScatterSum(torch::Tensor& full, torch::Tensor& part) = 0;
  virtual void Broadcast(torch::Tensor& tensor, int root) = 0;
  // Afterwards `root`'s `tensor` holds the sum over ranks; the others' contents are not kept.
  virtual void ReduceSum(torch::Tensor& tensor, int root) = 0;
  virtual void Barrier() = 0;
  // Rows (dimension 0) of `input`, in runs of input_splits[r] rows for each rank r in turn, go
  // to rank r; `output` receives output_splits[r] rows from each rank r, in rank order. Rank
  // r's input_splits[q] must be rank q's output_splits[r]; both tensors contiguous.
  virtual void AllToAll(torch::Tensor& output, torch::Tensor& input,
                        const std::vector<int64_t>& output_splits,
                        const std::vector<int64_t>& input_splits) = 0;

  // Broadcast and ReduceSum started, to be waited for later, so that they overlap what the
  // caller computes meanwhile (per-block parameter gathers and gradient reductions). Collectives
  // are matched across ranks in the order they are started. Where the backend cannot overlap,
  // they run at once and Wait returns at once.
  virtual std::unique_ptr<PendingCollective> StartBroadcast(torch::Tensor& tensor, int root);
  virtual std::unique_ptr<PendingCollective> StartReduceSum(torch::Tensor& tensor, int root);
};

// A group of one: every collective is the identity.
class SoloCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "solo"; }
  void AllReduceSum(torch::Tensor&) override {}
  void AllGather(torch::Tensor&) override {}
  void ReduceScatterSum(torch::Tensor& full, torch::Tensor& part) override { part.copy_(full); }
  void Broadcast(torch::Tensor&, int) override {}
  void ReduceSum(torch::Tensor&, int) override {}
  void Barrier() override {}
  void AllToAll(torch::Tensor& output, torch::Tensor& input, const std::vector<int64_t>&,
                const std::vector<int64_t>&) override {
    output.copy_(input);
  }
};

enum class CollectiveBackend { kGloo, kNccl };

// Where ranks meet: rank 0 serves a c10d TCPStore at master_addr:master_port.
struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

// The world's store (rank 0 serves it). Fails with a message naming the address.
absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectStore(const Rendezvous& rv);
// Another client connection to the same store, for a thread of its own.
absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectExtraClient(const Rendezvous& rv);

// A communicator over `members` (world ranks, in group rank order) for the calling rank, which
// must be one of them. `name` keeps groups apart in the store; Gloo listens on `gloo_host`'s
// address (this node's, as the other ranks reach it), over `gloo_connections` connections to
// each peer, each with a thread (AllReduceSumParts uses them at once; one collective uses one).
absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    CollectiveBackend backend, const c10::intrusive_ptr<c10d::Store>& store,
    const std::string& name, const std::vector<int>& members, int world_rank,
    const std::string& gloo_host, std::chrono::milliseconds timeout, int gloo_connections = 1);

// The address Gloo should listen on: TESSERA_GLOO_HOST when set, loopback when the master is
// on loopback (a single machine), else this host's name.
std::string DefaultGlooHost(const std::string& master_addr);

// True when this build can create NCCL communicators (CUDA and NCCL were found at build time).
bool NcclAvailable();

}  // namespace tessera::engine
