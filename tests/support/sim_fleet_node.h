#pragma once
// The parts of a SimFleet (sim_fleet.h) that its two source files share: a node's state and its
// control stream. Not for the fleet's users.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tessera/v1/worker.grpc.pb.h"
#include "tests/support/sim_fleet.h"

namespace tessera::testing {

// One node's control stream. Streams are kept until the fleet goes (a node that reconnects
// gets a new one), so a send racing the stream's end never touches freed memory.
class SimFleet::Stream : public grpc::ClientBidiReactor<v1::WorkerMessage, v1::ControlMessage> {
 public:
  Stream(SimFleet* fleet, size_t node, v1::WorkerControl::Stub* stub, const std::string& key,
         const v1::WorkerMessage& registration)
      : fleet_(fleet), node_(node) {
    ctx_.AddMetadata("authorization", "Bearer " + key);
    stub->async()->Connect(&ctx_, this);
    StartRead(&in_);
    Send(registration);
    StartCall();
  }

  void Send(const v1::WorkerMessage& m) {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    queue_.push_back(m);
    if (!writing_) WriteNext();
  }
  void Cancel() { ctx_.TryCancel(); }
  bool done() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  void WaitDone() {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return done_; });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    writing_ = false;
    if (ok && !queue_.empty()) WriteNext();
  }
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  void WriteNext() {
    out_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    StartWrite(&out_);
  }

  SimFleet* const fleet_;
  const size_t node_;
  grpc::ClientContext ctx_;
  v1::ControlMessage in_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::deque<v1::WorkerMessage> queue_;
  v1::WorkerMessage out_;
  bool writing_ = false;
  bool done_ = false;
};

// A node's state: its key, stream, heartbeats and attempts.
class SimFleet::Node {
 public:
  explicit Node(NodeSpec spec) : spec_(std::move(spec)) {}

  const std::string& name() const { return spec_.node.name(); }
  const std::string& key() const { return spec_.key; }

  v1::WorkerMessage Registration() const {
    v1::WorkerMessage reg;
    *reg.mutable_register_()->mutable_node() = spec_.node;
    reg.mutable_register_()->set_process_id(absl::StrCat("sim-", name()));
    return reg;
  }

  std::mutex mu;
  Stream* stream = nullptr;  // owned by `streams`
  std::vector<std::unique_ptr<Stream>> streams;
  bool registered = false;
  bool killed = false;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  int64_t sequence = 0;
  std::map<int64_t, absl::Time> sent;  // the last few heartbeats' send times
  absl::Time last_heartbeat_sent;
  // Attempts whose ranks run (their ranks), and ended ones still reported (until when).
  std::map<std::pair<std::string, int32_t>, std::vector<v1::RankExit>> running;
  std::map<std::pair<std::string, int32_t>, std::pair<std::vector<v1::RankExit>, absl::Time>> ended;

 private:
  const NodeSpec spec_;
};

}  // namespace tessera::testing
