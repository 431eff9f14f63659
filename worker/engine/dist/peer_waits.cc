#include "worker/engine/dist/peer_waits.h"

#include <chrono>
#include <utility>

namespace tessera::engine {

PeerWaits::PeerWaits(std::function<void(bool waiting)> mark, std::function<double()> seconds)
    : mark_(std::move(mark)), seconds_(std::move(seconds)) {}

double PeerWaits::MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void PeerWaits::Begin() {
  absl::MutexLock lock(&mu_);
  if (depth_++ == 0) {
    began_ = seconds_();
    mark_(true);
  }
}

void PeerWaits::End() {
  absl::MutexLock lock(&mu_);
  if (--depth_ == 0) {
    waited_ += seconds_() - began_;
    mark_(false);
  }
}

double PeerWaits::waited_seconds() const {
  absl::MutexLock lock(&mu_);
  return depth_ > 0 ? waited_ + (seconds_() - began_) : waited_;
}

bool PeerWaits::waiting() const {
  absl::MutexLock lock(&mu_);
  return depth_ > 0;
}

namespace {

class MarkedPending final : public PendingCollective {
 public:
  MarkedPending(std::unique_ptr<PendingCollective> inner, PeerWaits& waits)
      : inner_(std::move(inner)), waits_(waits) {}
  void Wait() override {
    PeerWaits::Scope wait(waits_);
    inner_->Wait();
  }

 private:
  std::unique_ptr<PendingCollective> inner_;
  PeerWaits& waits_;
};

class WaitMarkingCommunicator final : public Communicator {
 public:
  WaitMarkingCommunicator(std::unique_ptr<Communicator> inner, PeerWaits& waits)
      : inner_(std::move(inner)), waits_(waits) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override { return inner_->backend(); }

  void AllReduceSum(torch::Tensor& tensor) override {
    PeerWaits::Scope wait(waits_);
    inner_->AllReduceSum(tensor);
  }
  void AllReduceSumParts(std::vector<torch::Tensor>& parts) override {
    PeerWaits::Scope wait(waits_);
    inner_->AllReduceSumParts(parts);
  }
  void AllGather(torch::Tensor& full) override {
    PeerWaits::Scope wait(waits_);
    inner_->AllGather(full);
  }
  void ReduceScatterSum(torch::Tensor& full, torch::Tensor& part) override {
    PeerWaits::Scope wait(waits_);
    inner_->ReduceScatterSum(full, part);
  }
  void Broadcast(torch::Tensor& tensor, int root) override {
    PeerWaits::Scope wait(waits_);
    inner_->Broadcast(tensor, root);
  }
  void ReduceSum(torch::Tensor& tensor, int root) override {
    PeerWaits::Scope wait(waits_);
    inner_->ReduceSum(tensor, root);
  }
  void Barrier() override {
    PeerWaits::Scope wait(waits_);
    inner_->Barrier();
  }
  void AllToAll(torch::Tensor& output, torch::Tensor& input,
                const std::vector<int64_t>& output_splits,
                const std::vector<int64_t>& input_splits) override {
    PeerWaits::Scope wait(waits_);
    inner_->AllToAll(output, input, output_splits, input_splits);
  }
  // Starting may block too (a backend that cannot overlap runs the collective at once).
  std::unique_ptr<PendingCollective> StartBroadcast(torch::Tensor& tensor, int root) override {
    PeerWaits::Scope wait(waits_);
    return std::make_unique<MarkedPending>(inner_->StartBroadcast(tensor, root), waits_);
  }
  std::unique_ptr<PendingCollective> StartReduceSum(torch::Tensor& tensor, int root) override {
    PeerWaits::Scope wait(waits_);
    return std::make_unique<MarkedPending>(inner_->StartReduceSum(tensor, root), waits_);
  }

 private:
  std::unique_ptr<Communicator> inner_;
  PeerWaits& waits_;
};

}  // namespace

std::unique_ptr<Communicator> MarkPeerWaits(std::unique_ptr<Communicator> inner, PeerWaits& waits) {
  return std::make_unique<WaitMarkingCommunicator>(std::move(inner), waits);
}

}  // namespace tessera::engine
