#pragma once
// The cluster bench_goodput trains on: a private PostgreSQL, the split control plane of
// docs/operator-guide.md as separate processes (tessera-runs, two tessera-schedulers, leader and
// standby, tessera-cordon, tessera-logs, tessera-health), each on a fixed loopback port so that a
// restarted process is found where the others look for it, and workers with simulated GPUs that
// allow fault injection. Every call the bench makes goes over real gRPC with the admin key.

#include <grpcpp/grpcpp.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/health.grpc.pb.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tests/support/postgres_server.h"
#include "tests/support/process.h"

namespace tessera::bench {

using testing::Process;

struct SplitClusterOptions {
  int workers = 4;
  int gpus_per_worker = 2;
  // With a standby scheduler, workers must find the new leader before their leases end; a
  // frozen leader's database session ends after about 5 s (docs/operator-guide.md).
  int lease_seconds = 10;
  // A node heard from is lost once silent this long (0: the lease): a dead node costs its run
  // this, not the whole lease.
  double loss_seconds = 2.8;
  // tessera-health --move-off-stragglers (its default: true).
  bool move_off_stragglers = true;
  std::string root;  // state folders, the shared folder, process logs
};

class SplitCluster {
 public:
  static absl::StatusOr<std::unique_ptr<SplitCluster>> Start(const SplitClusterOptions& options);
  ~SplitCluster();

  // Starts (or restarts) a service by role: "runs", "sched0", "sched1", "cordon", "logs", "health".
  absl::Status StartService(const std::string& role);
  Process& service(const std::string& role) { return services_.at(role); }
  // The scheduler role ("sched0" or "sched1") that leads now, or an error.
  absl::StatusOr<std::string> Leader();

  absl::Status StartWorker(const std::string& name);
  Process& worker(const std::string& name) { return workers_.at(name); }
  std::vector<std::string> worker_names() const;

  testing::PostgresServer& pg() { return *pg_; }
  const std::string& shared_dir() const { return shared_; }
  const std::string& runs_endpoint() const { return endpoints_.at("runs"); }
  const std::string& admin_key() const { return admin_key_; }

  // A context carrying the admin key, with a deadline.
  std::unique_ptr<grpc::ClientContext> Ctx(absl::Duration deadline = absl::Seconds(5)) const;
  std::unique_ptr<v1::RunService::Stub> runs;
  std::unique_ptr<v1::CordonService::Stub> cordon;
  std::unique_ptr<v1::HealthService::Stub> health;
  std::unique_ptr<v1::LogService::Stub> logs;
  std::array<std::unique_ptr<v1::SchedulerService::Stub>, 2> schedulers;

  // `mcli ARGS` against the run manager with the admin key; its output, or an error with it.
  absl::StatusOr<std::string> Mcli(const std::string& args);

 private:
  explicit SplitCluster(SplitClusterOptions options) : options_(std::move(options)) {}
  std::string ProcessLog(const std::string& name);

  SplitClusterOptions options_;
  std::unique_ptr<testing::PostgresServer> pg_;
  std::string admin_key_, shared_;
  std::map<std::string, std::string> endpoints_;
  std::map<std::string, Process> services_;
  std::map<std::string, Process> workers_;
  int log_counter_ = 0;
};

}  // namespace tessera::bench
