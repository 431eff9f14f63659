#pragma once
// Fakes of the services the health API talks to, recording what it asked.

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "healthcheck/health_clients.h"

namespace tessera::health::testing {

class FakeScheduler final : public SchedulerApi {
 public:
  std::map<std::string, v1::Node> nodes;
  std::vector<v1::DispatchToWorkerRequest> dispatched;
  std::vector<v1::EvictNodeRequest> evicted;
  std::map<std::string, std::vector<std::string>> runs_on;  // node -> run names
  std::set<std::string> unreachable;     // the worker is not connected: dispatch fails
  std::set<std::string> refused;         // the worker cannot start the canary
  std::set<std::string> unacknowledged;  // the canary starts, its acknowledgement comes late

  v1::Node& Add(const std::string& name, const std::string& address = "") {
    v1::Node& n = nodes[name];
    n.set_name(name);
    n.set_address(address.empty() ? name + ".local" : address);
    n.set_liveness(v1::NODE_LIVENESS_ONLINE);
    n.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
    return n;
  }
  absl::StatusOr<std::vector<v1::Node>> ListNodes() override {
    std::vector<v1::Node> out;
    for (const auto& [k, n] : nodes) out.push_back(n);
    return out;
  }
  absl::Status DispatchToWorker(const v1::DispatchToWorkerRequest& req) override {
    if (unreachable.count(req.node_name())) {
      return absl::UnavailableError("the worker of node " + req.node_name() + " is not connected");
    }
    if (refused.count(req.node_name())) {
      return absl::FailedPreconditionError("tessera-canary: no such file or directory");
    }
    dispatched.push_back(req);
    if (unacknowledged.count(req.node_name())) {
      return absl::DeadlineExceededError("node " + req.node_name() + " did not acknowledge");
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::string>> EvictNode(const v1::EvictNodeRequest& req) override {
    evicted.push_back(req);
    return runs_on[req.node_name()];
  }
  // The canaries dispatched so far of `kind`, and forgets them.
  std::vector<v1::DispatchToWorkerRequest> Take(v1::HealthCheckKind kind) {
    std::vector<v1::DispatchToWorkerRequest> out, rest;
    for (auto& d : dispatched) {
      (d.has_start_canary() && d.start_canary().kind() == kind ? out : rest).push_back(d);
    }
    dispatched = rest;
    return out;
  }
};

class FakeCordon final : public CordonApi {
 public:
  explicit FakeCordon(FakeScheduler& scheduler) : scheduler_(scheduler) {}
  std::vector<std::pair<std::string, std::string>> cordoned, uncordoned, drained;  // node, reason
  std::vector<google::protobuf::Struct> evidence;
  absl::Status Cordon(const std::string& node, const std::string& reason,
                      const google::protobuf::Struct& e) override {
    cordoned.emplace_back(node, reason);
    evidence.push_back(e);
    scheduler_.nodes[node].set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
    scheduler_.nodes[node].set_status_reason(reason);
    return absl::OkStatus();
  }
  absl::Status Uncordon(const std::string& node, const std::string& reason) override {
    uncordoned.emplace_back(node, reason);
    scheduler_.nodes[node].set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
    scheduler_.nodes[node].set_status_reason("");
    return absl::OkStatus();
  }
  absl::Status Drain(const std::string& node, const std::string& reason) override {
    drained.emplace_back(node, reason);
    scheduler_.nodes[node].set_admin_state(v1::NODE_ADMIN_STATE_DRAINING);
    scheduler_.nodes[node].set_status_reason(reason);
    return absl::OkStatus();
  }

 private:
  FakeScheduler& scheduler_;
};

class FakeRuns final : public RunsApi {
 public:
  std::vector<v1::Run> running;
  // Each ClearNodeAvoidance call: the nodes and the sweep; `clear_status` is what it returns.
  std::vector<std::pair<std::vector<std::string>, std::string>> cleared;
  absl::Status clear_status = absl::OkStatus();
  absl::StatusOr<std::vector<v1::Run>> ListRunning() override { return running; }
  absl::StatusOr<std::vector<std::string>> ClearNodeAvoidance(const std::vector<std::string>& nodes,
                                                              const std::string& sweep_id,
                                                              absl::Time) override {
    cleared.emplace_back(nodes, sweep_id);
    if (!clear_status.ok()) return clear_status;
    return std::vector<std::string>{};
  }
};

}  // namespace tessera::health::testing
