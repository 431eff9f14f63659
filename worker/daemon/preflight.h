#pragma once
// The worker's pre-flight checks: fast checks of the node before a run's ranks start on it, so
// that a node that cannot run them is taken out before it wastes a run's start (and, on a large
// run, every other node's). Like Slurm's HealthCheckProgram, operators add their own scripts.
//
//   gpus             every GPU the attempt was given is present, with the UUID it registered
//   driver           the GPU driver is the version of the rest of the cluster
//   disk:PATH        the state folder and the shared folder have min_free_disk_bytes free
//   shm              /dev/shm (NCCL's and the data loaders' shared memory) has min_shm_bytes free
//   shared-writable  the shared folder takes a file: written, synced, read back, removed
//   clock            the wall clock is within the control plane's bound of its clock
//   script:NAME      each operator script (--preflight-check) exits 0 within script_timeout
//
// Every check is reported, passed or not, with what it found; a failure cordons the node and the
// run is placed elsewhere without using a retry (scheduler/service/preflight_cordon.h).

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "tessera/v1/health.pb.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/clock_skew.h"
#include "worker/gpu/gpu_discovery.h"
#include "worker/image/tool_runner.h"

namespace tessera::worker {

struct PreflightConfig {
  std::string node_name;
  std::string state_dir;
  std::string shared_dir;  // empty: none, and no writability check
  std::string shm_dir = "/dev/shm";
  int64_t min_free_disk_bytes = int64_t{1} << 30;
  int64_t min_shm_bytes = int64_t{64} << 20;
  // Run with no arguments and TESSERA_NODE_NAME, TESSERA_RUN_NAME in their environment.
  std::vector<std::string> scripts;
  absl::Duration script_timeout = absl::Seconds(30);
};

class PreflightChecker {
 public:
  // `discover` finds the node's GPUs now; `skew` may be null (no clock check); `scripts` runs
  // the operator's scripts (null: none run).
  PreflightChecker(PreflightConfig config, std::function<absl::StatusOr<GpuInventory>()> discover,
                   const ClockSkew* skew, std::shared_ptr<image::ToolRunner> scripts,
                   std::shared_ptr<Clock> clock);

  std::vector<v1::PreflightCheck> Run(const v1::StartAttempt& start) const;
  // Kills the scripts running now and fails every later one: the worker is stopping.
  void CancelScripts() {
    if (scripts_) scripts_->CancelAll();
  }

 private:
  v1::PreflightCheck Gpus(const v1::StartAttempt& start,
                          const absl::StatusOr<GpuInventory>& found) const;
  std::optional<v1::PreflightCheck> Driver(const v1::StartAttempt& start,
                                           const absl::StatusOr<GpuInventory>& found) const;
  v1::PreflightCheck FreeSpace(const std::string& name, const std::string& path,
                               int64_t required) const;
  v1::PreflightCheck SharedWritable() const;
  std::optional<v1::PreflightCheck> ClockCheck(const v1::StartAttempt& start) const;
  v1::PreflightCheck Script(const std::string& path, const v1::StartAttempt& start) const;

  PreflightConfig config_;
  std::function<absl::StatusOr<GpuInventory>()> discover_;
  const ClockSkew* skew_;
  std::shared_ptr<image::ToolRunner> scripts_;
  std::shared_ptr<tessera::Clock> clock_;
};

bool AllPassed(const std::vector<v1::PreflightCheck>& checks);

// Checks the configuration's paths and numbers; the error names the flag.
absl::Status ValidatePreflightConfig(const PreflightConfig& config);

}  // namespace tessera::worker
