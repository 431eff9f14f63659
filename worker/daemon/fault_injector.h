// Fault injection, so that detection and remediation are tested on machines without GPUs
// (`mcli admin inject-fault NODE --kind ...`, admins only, and only on workers started with
// --allow-fault-injection):
//   xid, ecc   a simulated GPU reports an XID error (79: fallen off the bus, unless another code
//              is given) or an uncorrectable ECC error, through the same path as NVML's faults
//   slow:F     the node's ranks and canaries run F of the time (ProcessThrottle): really slower
//   hang       they stop for good: no more progress
//   crash      the node dies: its ranks are killed and the worker exits at once
//   netdrop    the control stream is cut for some seconds: the lease lapses and the node fences
//   link-down  the data link is cut (for some seconds, or until cleared): all-reduce canaries
//              reach no peer, the control stream stays up (a failed switch or port)
//   clear      slow, hang and link-down are lifted
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/process_throttle.h"
#include "worker/gpu/gpu_probe.h"

namespace tessera::worker {

struct FaultTargets {
  SimulatedGpuProbe* simulated_gpus = nullptr;  // null when the GPUs are real
  int gpu_count = 0;
  ProcessThrottle* throttle = nullptr;
  std::function<void(absl::Duration)> drop_network;
  // How long the data link is down from now (InfiniteDuration: until cleared; zero: up again).
  std::function<void(absl::Duration)> link_down;
  std::function<void()> crash;
};

class FaultInjector {
 public:
  FaultInjector(bool allowed, std::string node_name, FaultTargets targets);
  // FAILED_PRECONDITION when this worker does not allow injection or the fault does not apply
  // (an XID on real GPUs); INVALID_ARGUMENT for a bad factor or GPU index.
  absl::Status Inject(const v1::InjectFault& fault);
  // What Inject would refuse, without injecting.
  absl::Status Validate(const v1::InjectFault& fault) const;

 private:
  const bool allowed_;
  const std::string node_name_;
  FaultTargets targets_;
};

}  // namespace tessera::worker
