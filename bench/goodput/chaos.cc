#include "bench/goodput/chaos.h"

#include <signal.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tessera::bench {
namespace {

// How long a killed service stays down before it is started again, and how long a frozen
// leader stays frozen (as issue 11's test: 20 s).
constexpr absl::Duration kServiceDown = absl::Seconds(5);
constexpr absl::Duration kLeaderFrozen = absl::Seconds(20);
// netdrop: longer than a lease, so that the node really fences itself and is declared lost.
constexpr double kNetdropSeconds = 15;
constexpr double kSlowFactor = 0.3;

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

const std::vector<std::string>& AllFaultKinds() {
  static const std::vector<std::string> kinds = {
      "xid",         "crash",       "hang",      "slow",      "netdrop",
      "kill-leader", "stop-leader", "kill-runs", "kill-logs", "pg-restart"};
  return kinds;
}

bool IsNodeFault(const std::string& kind) {
  return kind == "xid" || kind == "crash" || kind == "hang" || kind == "slow" || kind == "netdrop";
}

absl::Status Chaos::InjectNodeFault(const std::string& node, const std::string& kind) {
  v1::InjectFaultRequest req;
  req.set_node_name(node);
  if (kind == "xid") {
    req.set_kind(v1::FAULT_KIND_XID);
  } else if (kind == "crash") {
    req.set_kind(v1::FAULT_KIND_CRASH);
  } else if (kind == "hang") {
    req.set_kind(v1::FAULT_KIND_HANG);
  } else if (kind == "slow") {
    req.set_kind(v1::FAULT_KIND_SLOW);
    req.set_factor(kSlowFactor);
  } else if (kind == "netdrop") {
    req.set_kind(v1::FAULT_KIND_NETDROP);
    req.set_seconds(kNetdropSeconds);
  } else if (kind == "clear") {
    req.set_kind(v1::FAULT_KIND_CLEAR);
  } else {
    return absl::InvalidArgumentError("no node fault " + kind);
  }
  // The health API passes the fault to the scheduler that holds the node's stream; right after
  // a failover that can take a few tries.
  grpc::Status st;
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto ctx = cluster_.Ctx();
    v1::InjectFaultResponse resp;
    st = cluster_.health->InjectFault(ctx.get(), req, &resp);
    if (st.ok()) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(250));
  }
  return absl::UnavailableError(
      absl::StrCat("inject ", kind, " into ", node, ": ", st.error_message()));
}

absl::StatusOr<InjectedFault> Chaos::Inject(const std::string& kind,
                                            const std::vector<std::string>& run_nodes,
                                            size_t pick) {
  const absl::Time now = absl::Now();
  if (IsNodeFault(kind)) {
    if (run_nodes.empty()) return absl::FailedPreconditionError("the run has no nodes now");
    const std::string node = run_nodes[pick % run_nodes.size()];
    if (auto st = InjectNodeFault(node, kind); !st.ok()) return st;
    broken_nodes_.push_back(node);
    if (kind == "crash") crashed_nodes_.push_back(node);
    return InjectedFault{kind, node};
  }
  if (kind == "kill-leader" || kind == "stop-leader") {
    auto leader = cluster_.Leader();
    if (!leader.ok()) return leader.status();
    const std::string role = *leader;
    if (kind == "kill-leader") {
      if (auto st = cluster_.service(role).Kill(SIGKILL); !st.ok()) return st.status();
      repairs_.push_back({now + kServiceDown, "start " + role,
                          [this, role] { return cluster_.StartService(role); }});
    } else {
      const pid_t pid = cluster_.service(role).pid();
      if (::kill(pid, SIGSTOP) != 0) return absl::InternalError("SIGSTOP failed");
      repairs_.push_back({now + kLeaderFrozen, "resume " + role, [pid] {
                            return ::kill(pid, SIGCONT) == 0
                                       ? absl::OkStatus()
                                       : absl::InternalError("SIGCONT failed");
                          }});
    }
    return InjectedFault{kind, role};
  }
  if (kind == "kill-runs" || kind == "kill-logs") {
    const std::string role = kind == "kill-runs" ? "runs" : "logs";
    if (auto st = cluster_.service(role).Kill(SIGKILL); !st.ok()) return st.status();
    repairs_.push_back({now + kServiceDown, "start " + role,
                        [this, role] { return cluster_.StartService(role); }});
    return InjectedFault{kind, role};
  }
  if (kind == "pg-restart") {
    if (auto st = cluster_.pg().Stop(); !st.ok()) return st;
    if (auto st = cluster_.pg().Resume(); !st.ok()) return st;
    return InjectedFault{kind, "postgresql"};
  }
  return absl::InvalidArgumentError("no fault kind " + kind);
}

std::vector<std::string> Chaos::RunRepairs(bool all) {
  std::vector<std::string> failed;
  const absl::Time now = absl::Now();
  for (auto it = repairs_.begin(); it != repairs_.end();) {
    if (!all && it->due > now) {
      ++it;
      continue;
    }
    if (auto st = it->act(); !st.ok()) failed.push_back(it->what + ": " + st.ToString());
    it = repairs_.erase(it);
  }
  return failed;
}

void Chaos::RepairNodes(const std::vector<std::string>& run_nodes) {
  for (auto it = broken_nodes_.begin(); it != broken_nodes_.end();) {
    if (Contains(run_nodes, *it)) {
      ++it;
      continue;
    }
    if (auto st = RepairNode(*it); !st.ok()) {
      // Its worker is away (a netdrop on a slowed node, say): tried again at the next call, so
      // that a fault is never left on a node for the rest of the run. Said once.
      if (repair_failing_.insert(*it).second) {
        std::fprintf(stderr, "repairing %s: %s (trying again until it works)\n", it->c_str(),
                     st.ToString().c_str());
      }
      ++it;
      continue;
    }
    repair_failing_.erase(*it);
    it = broken_nodes_.erase(it);
  }
}

absl::Status Chaos::RepairNode(const std::string& node) {
  const bool crashed = Contains(crashed_nodes_, node);
  if (crashed) {
    if (auto st = cluster_.StartWorker(node); !st.ok()) return st;
    crashed_nodes_.erase(std::find(crashed_nodes_.begin(), crashed_nodes_.end(), node));
  }
  // Lifts slow and hang (a restarted worker has neither). A node still finding the leader after
  // netdrop cannot take it, and is uncordoned all the same.
  const absl::Status cleared = crashed ? absl::OkStatus() : InjectNodeFault(node, "clear");
  // Cordoned by the health API, or for flapping (netdrop and crash each lose the node once).
  v1::UncordonNodeRequest req;
  req.set_node_name(node);
  req.set_reason("bench_goodput: repaired");
  v1::UncordonNodeResponse resp;
  auto ctx = cluster_.Ctx();
  (void)cluster_.cordon->UncordonNode(ctx.get(), req, &resp);  // not cordoned: nothing to do
  return cleared;
}

}  // namespace tessera::bench
