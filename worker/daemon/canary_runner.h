// Runs the health API's canaries on this node: each StartCanary is asked of a `tessera-canary
// serve` process (CanaryServer), whose answer becomes the HealthCheckResult sent back to the
// control plane. A server that answers is kept for the next check (a sweep asks a node's checks
// seconds apart) and ended once idle for `idle_limit`, so that between sweeps nothing of LibTorch,
// or of a GPU's memory, is held. A canary that dies without a result is reported as an error
// with how it ended; one that outlives its timeout is killed and reported as a timeout.
//
// An all-reduce's rendezvous is kept from the node's ranks: its token travels only on the
// server's input, and while the check runs the master's port is walled from every rank of the
// node (NetworkWalls::GuardPort), on each member's node. The health API draws the ports below
// 1024, which no rank can bind; a node that lets anyone bind them is warned about once.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/canary_server.h"
#include "worker/daemon/network_walls.h"

namespace tessera::worker {

class CanaryRunner {
 public:
  // Servers kept for the next check, at most; more run only while checks overlap.
  static constexpr size_t kMaxIdleServers = 2;

  // `walls` (null: none) wall each all-reduce's rendezvous port from the node's ranks.
  CanaryRunner(std::string binary, std::string node_name, std::string state_dir,
               std::shared_ptr<Clock> clock, absl::Duration idle_limit = absl::Seconds(30),
               std::shared_ptr<NetworkWalls> walls = nullptr);
  // Kills the canaries, running and idle.
  ~CanaryRunner();

  // Starts the canary in the background; a request that cannot run is an error now.
  absl::Status Start(const v1::StartCanary& start);
  // Results of the canaries that ended since the last call. Also ends the servers idle for
  // longer than the limit.
  std::vector<v1::HealthCheckResult> TakeResults();
  // The servers' process groups, busy and idle: what an injected fault slows or stops.
  std::vector<pid_t> ProcessGroups();
  // Servers waiting for a check.
  size_t IdleServers();
  // An injected link fault (FAULT_KIND_LINK_DOWN): for `down` from now (InfiniteDuration:
  // until cleared; zero clears it) this node's all-reduce checks reach no peer. Such a check
  // runs no canary and is answered ERROR at once; its peers' canaries wait for it and time out,
  // as behind a dead switch port. Compute checks and the control stream are untouched.
  void SetLinkDown(absl::Duration down);

  // The tessera-canary arguments for a request (also what a person would run by hand).
  static absl::StatusOr<std::vector<std::string>> Arguments(const v1::StartCanary& start);

 private:
  struct IdleServer {
    std::unique_ptr<CanaryServer> server;
    absl::Time since;
  };
  struct Worker {
    std::thread thread;
    bool done = false;
  };

  void Run(v1::StartCanary start, std::vector<std::string> args, Worker* worker);
  // Asks a server (a second, new one when the kept one had ended unseen) for the check.
  absl::StatusOr<std::string> Ask(const std::vector<std::string>& args, absl::Duration limit,
                                  absl::StatusOr<std::unique_ptr<CanaryServer>>& server);
  // The rendezvous port walled from the node's ranks while an all-reduce runs (GuardPort);
  // false where it could not be.
  bool GuardRendezvous(const v1::StartCanary& start);
  void ReleaseRendezvous(const v1::StartCanary& start);
  // An idle server still running (unless `fresh`), or a new one; counted busy.
  absl::StatusOr<std::unique_ptr<CanaryServer>> TakeServer(bool fresh);
  // Back to the idle ones when `keep` and there is room; otherwise ended.
  void ReleaseServer(std::unique_ptr<CanaryServer> server, bool keep);
  // A result for `start`, named and started now; the verdict is the caller's.
  v1::HealthCheckResult ResultFor(const v1::StartCanary& start) const;
  // What an all-reduce check behind a downed link (SetLinkDown) is answered.
  v1::HealthCheckResult LinkDownResult(const v1::StartCanary& start) const;
  // The idle servers past the limit, out of the pool (ended by their destruction, outside the
  // lock).
  std::vector<IdleServer> TakeExpiredServers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string binary_, node_name_, state_dir_;
  const std::shared_ptr<Clock> clock_;
  const absl::Duration idle_limit_;
  const std::shared_ptr<NetworkWalls> walls_;
  std::atomic<bool> warned_port_ = false;
  absl::Mutex mu_;
  std::vector<v1::HealthCheckResult> results_ ABSL_GUARDED_BY(mu_);
  std::vector<pid_t> busy_ ABSL_GUARDED_BY(mu_);
  std::vector<IdleServer> idle_ ABSL_GUARDED_BY(mu_);
  std::list<Worker> workers_ ABSL_GUARDED_BY(mu_);
  int servers_started_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time link_down_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace tessera::worker
