#include "worker/engine/dist/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/str_cat.h"
#include "worker/engine/dist/nccl_communicator.h"

namespace tessera::engine {
namespace {

class FinishedCollective final : public PendingCollective {
 public:
  void Wait() override {}
};

// A Gloo collective running on one of the process group's threads; `keep` holds the tensors it
// reads and writes until it is done.
class GlooPending final : public PendingCollective {
 public:
  GlooPending(c10::intrusive_ptr<c10d::Work> work, std::vector<torch::Tensor> keep)
      : work_(std::move(work)), keep_(std::move(keep)) {}
  ~GlooPending() override {
    // Never leave a collective writing into freed memory. A peer that died makes the wait
    // throw; a destructor must not (it may run while that very error unwinds), and the rank is
    // failing anyway, so the error is reported by whoever waited first.
    if (!work_) return;
    try {
      work_->wait();
    } catch (const std::exception&) {
    }
  }
  void Wait() override {
    work_->wait();
    work_.reset();
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<torch::Tensor> keep_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(c10::intrusive_ptr<c10d::ProcessGroupGloo> pg) : pg_(std::move(pg)) {}
  int rank() const override { return pg_->getRank(); }
  int size() const override { return pg_->getSize(); }
  std::string backend() const override { return "gloo"; }

  void AllReduceSum(torch::Tensor& tensor) override {
    std::vector<torch::Tensor> tensors{tensor};
    pg_->allreduce(tensors)->wait();
  }
  // ProcessGroupGloo gives each collective the next of its contexts (one per device, each its
  // own connections) and runs it on one of its threads: parts issued together run together.
  void AllReduceSumParts(std::vector<torch::Tensor>& parts) override {
    std::vector<c10::intrusive_ptr<c10d::Work>> running;
    for (auto& part : parts) {
      std::vector<torch::Tensor> one{part};
      running.push_back(pg_->allreduce(one));
    }
    for (auto& work : running) work->wait();
  }
  void AllGather(torch::Tensor& full) override {
    const int64_t part = full.numel() / size();
    std::vector<torch::Tensor> outputs;
    for (int r = 0; r < size(); ++r) outputs.push_back(full.narrow(0, r * part, part));
    // The input must not alias an output Gloo writes to.
    std::vector<torch::Tensor> input{outputs[static_cast<size_t>(rank())].clone()};
    std::vector<std::vector<torch::Tensor>> out{outputs};
    pg_->allgather(out, input)->wait();
  }
  void ReduceScatterSum(torch::Tensor& full, torch::Tensor& part) override {
    AllReduceSum(full);
    part.copy_(full.narrow(0, rank() * part.numel(), part.numel()));
  }
  void Broadcast(torch::Tensor& tensor, int root) override {
    std::vector<torch::Tensor> tensors{tensor};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    pg_->broadcast(tensors, o)->wait();
  }
  void ReduceSum(torch::Tensor& tensor, int root) override { StartReduceSum(tensor, root)->Wait(); }
  void Barrier() override { pg_->barrier()->wait(); }
  void AllToAll(torch::Tensor& output, torch::Tensor& input,
                const std::vector<int64_t>& output_splits,
                const std::vector<int64_t>& input_splits) override {
    std::vector<int64_t> out(output_splits), in(input_splits);  // c10d takes them mutable
    pg_->alltoall_base(output, input, out, in)->wait();
  }

  std::unique_ptr<PendingCollective> StartBroadcast(torch::Tensor& tensor, int root) override {
    std::vector<torch::Tensor> tensors{tensor};
    c10d::BroadcastOptions o;
    o.rootRank = root;
    return std::make_unique<GlooPending>(pg_->broadcast(tensors, o), std::move(tensors));
  }
  std::unique_ptr<PendingCollective> StartReduceSum(torch::Tensor& tensor, int root) override {
    std::vector<torch::Tensor> tensors{tensor};
    c10d::ReduceOptions o;
    o.rootRank = root;
    return std::make_unique<GlooPending>(pg_->reduce(tensors, o), std::move(tensors));
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> Connect(const Rendezvous& rv, bool server,
                                                        bool wait_workers) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(rv.master_port);
  o.isServer = server;
  if (wait_workers) o.numWorkers = static_cast<size_t>(rv.world_size);
  o.waitWorkers = wait_workers;
  o.timeout = rv.timeout;
  try {
    return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::TCPStore>(rv.master_addr, o));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous at ", rv.master_addr, ":", rv.master_port, " failed: ", e.what()));
  }
}

}  // namespace

std::unique_ptr<PendingCollective> Communicator::StartBroadcast(torch::Tensor& tensor, int root) {
  Broadcast(tensor, root);
  return std::make_unique<FinishedCollective>();
}

std::unique_ptr<PendingCollective> Communicator::StartReduceSum(torch::Tensor& tensor, int root) {
  ReduceSum(tensor, root);
  return std::make_unique<FinishedCollective>();
}

std::string DefaultGlooHost(const std::string& master_addr) {
  if (const char* host = std::getenv("TESSERA_GLOO_HOST"); host != nullptr && *host != '\0') {
    return host;
  }
  if (master_addr == "localhost" || master_addr.rfind("127.", 0) == 0) return "127.0.0.1";
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectStore(const Rendezvous& rv) {
  return Connect(rv, rv.rank == 0, /*wait_workers=*/true);
}

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectExtraClient(const Rendezvous& rv) {
  return Connect(rv, /*server=*/false, /*wait_workers=*/false);
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    CollectiveBackend backend, const c10::intrusive_ptr<c10d::Store>& store,
    const std::string& name, const std::vector<int>& members, int world_rank,
    const std::string& gloo_host, std::chrono::milliseconds timeout, int gloo_connections) {
  const auto it = std::find(members.begin(), members.end(), world_rank);
  if (it == members.end()) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", world_rank, " is not in group ", name));
  }
  const int rank = static_cast<int>(it - members.begin());
  const int size = static_cast<int>(members.size());
  if (size == 1) return std::unique_ptr<Communicator>(new SoloCommunicator());
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, store);
  if (backend == CollectiveBackend::kNccl) {
    return CreateNcclCommunicator(prefixed, rank, size);
  }
  try {
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->timeout = timeout;
    const int connections = std::max(1, gloo_connections);
    opts->threads = std::max(opts->threads, connections);
    const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
    for (int i = 0; i < connections; ++i) {
      if (iface != nullptr && *iface != '\0') {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(iface));
      } else {
        opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(gloo_host));
      }
    }
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size, opts);
    return std::unique_ptr<Communicator>(new GlooCommunicator(std::move(pg)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("gloo group ", name, ": ", e.what()));
  }
}

}  // namespace tessera::engine
