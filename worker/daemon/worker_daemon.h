// tessera-worker, assembled: finds the GPUs, cleans up after a previous incarnation, starts the
// fence watchdog, the log shipper and the control session, and serves /metrics.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "transport/metrics/http_endpoint.h"
#include "transport/periodic_runner.h"
#include "transport/tls/tls_flags.h"
#include "worker/daemon/attempt_manager.h"
#include "worker/daemon/control_session.h"
#include "worker/daemon/fence_watchdog.h"
#include "worker/daemon/network_walls.h"
#include "worker/daemon/preflight.h"
#include "worker/daemon/progress_watcher.h"
#include "worker/daemon/rank_identity.h"
#include "worker/daemon/rank_sandbox.h"
#include "worker/daemon/shell_sessions.h"
#include "worker/daemon/spare_warmer.h"
#include "worker/gpu/gpu_discovery.h"
#include "worker/logship/log_shipper.h"

namespace tessera::worker {

struct WorkerOptions {
  std::string scheduler_endpoint;
  std::string log_endpoint;  // empty: the scheduler's
  // The node key (read from --api-key-file: never a flag or an environment variable, which
  // other processes on the node could read).
  std::string api_key;
  // Who ranks run as (--rank-user); nullopt: the worker's own user.
  // The sandbox and the image cache (sandbox_flags.h); null: ranks run directly on the node.
  std::shared_ptr<const RankSandbox> sandbox;
  std::shared_ptr<image::ImageCache> images;
  bool per_user_uids = false;
  std::string shared_dir;
  MemoryCheckpointSettings memory_checkpoints;  // --memory-checkpoint-dir, -bytes
  std::optional<RankIdentity> rank_identity;
  std::string node_name;
  std::string cluster = "local";
  std::string address;  // where this node's ranks are reachable (MASTER_ADDR); default: node name
  int simulate_gpus = -1;
  std::string state_dir;
  std::map<std::string, std::string> labels;
  // Environment for every rank on this node; a run's own env_variables win.
  std::map<std::string, std::string> rank_env;
  // Admins may inject faults into this node (simulated GPU errors, slowness, hangs ...).
  bool allow_fault_injection = false;
  // The canary program the health API's checks run.
  std::string canary_binary = "tessera-canary";
  absl::Duration fence_margin = absl::Milliseconds(500);
  // Ranks run at this nice value (AttemptManagerOptions::rank_nice).
  int rank_nice = 10;
  // An attempt's FINISHED waits this long at most for its ranks' last lines to be shipped
  // (AttemptManagerOptions::finish_waits_for_logs).
  absl::Duration finish_log_wait = absl::Seconds(5);
  bool fence_watchdog = true;
  std::string metrics_listen;  // host:port; empty: none
  // The server certificate and key /metrics serves HTTPS with (TLS only). Not the node's own
  // certificate, which is a client certificate: it identifies the node to the control plane.
  std::string metrics_tls_cert, metrics_tls_key;
  // Walls around the ranks' network traffic (network_walls.h): "auto" (where the node can),
  // "on" (or the worker does not start), "off"; and what they wall off besides the cloud's
  // metadata address and the worker's own ports.
  std::string network_walls = "auto";
  std::vector<WalledDestination> walled;
  // The node's certificate (CN node:NAME) and key, and the cluster CA: every channel is mutual
  // TLS, and /metrics is HTTPS (with metrics_tls_cert). Or plain text, loopback only.
  tls::TlsFlags tls{};
  // Who may read /metrics (scrape_access.h).
  metrics::ScrapeFlags scrape{};
  // Attempt folders (work dir, spooled logs) are removed this long after they last changed,
  // once their ranks are gone and their logs shipped.
  absl::Duration keep_finished = absl::Hours(24);
  // The pre-flight checks' thresholds and the operator's scripts (node name and folders are
  // filled in from the options above).
  PreflightConfig preflight;
};

class WorkerDaemon {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerDaemon>> Start(const WorkerOptions& options);
  // Stops the session, stops the ranks, ships what remains (briefly), stops the watchdog.
  ~WorkerDaemon();
  int metrics_port() const { return endpoint_ ? endpoint_->port() : 0; }

 private:
  WorkerDaemon() = default;
  // Start's steps, in order. The rank side: log shipping, progress, pre-flight checks, the
  // network walls' rules (not yet installed), the attempt manager; what a previous incarnation
  // left is cleaned up.
  absl::Status StartRanks(const GpuInventory& inventory,
                          std::shared_ptr<const RankSandbox> sandbox);
  absl::Status StartMetricsEndpoint();
  // Installs the walls; the node's tessera.io/network-walls label ("on", "off", "unenforced").
  absl::StatusOr<std::string> RaiseNetworkWalls();
  // GPU probes, canaries, the throttle and fault injection.
  void StartHealthParts(const GpuInventory& inventory);
  void StartControlSession(const v1::Node& node);
  void StartShells(const RankSandbox& sandbox);
  void StartMetricsRunner();
  void RefreshMetrics();
  void CollectGarbage();
  [[noreturn]] void Crash();

  WorkerOptions options_;
  std::shared_ptr<Clock> clock_;
  std::unique_ptr<LogShipper> shipper_;
  std::unique_ptr<ProgressWatcher> progress_;
  std::unique_ptr<AttemptManager> attempts_;
  std::unique_ptr<LeaseFile> lease_file_;
  std::unique_ptr<GpuProbe> gpu_probe_;
  SimulatedGpuProbe* simulated_gpus_ = nullptr;
  std::unique_ptr<CanaryRunner> canaries_;
  std::unique_ptr<ProcessThrottle> throttle_;
  std::unique_ptr<FaultInjector> faults_;
  std::unique_ptr<ClockSkew> clock_skew_;
  std::unique_ptr<PreflightChecker> preflight_;
  std::unique_ptr<SpareWarmer> spare_warmer_;  // before session_, which its answers go through
  std::unique_ptr<ControlSession> session_;
  std::unique_ptr<metrics::MetricsEndpoint> endpoint_;
  std::shared_ptr<image::ToolRunner> walls_runner_;
  std::shared_ptr<NetworkWalls> walls_;    // null: --network-walls off
  std::unique_ptr<ShellSessions> shells_;  // null: no sandbox, so no mcli connect
  pid_t watchdog_ = 0;
  std::unique_ptr<PeriodicRunner> metrics_runner_;  // metrics refreshed, old attempts removed
};

}  // namespace tessera::worker
