#pragma once
// The worker's counters of what happens to ranks and GPUs, in the process-wide registry (one
// worker per process): ranks started, ranks exited by cause, GPU probes taken and the faults
// they found by kind. Label values are bounded enums, never run names.
//
//   tessera_worker_rank_starts_total
//   tessera_worker_rank_exits_total{cause}   succeeded, failed, out_of_memory, signaled,
//                                            stopped, fenced, lost
//   tessera_worker_gpu_probes_total
//   tessera_worker_gpu_faults_total{kind}    XID, ECC_UNCORRECTABLE, ... (GpuFaultKind)

#include <string_view>

#include "tessera/v1/nodes.pb.h"
#include "transport/metrics/registry.h"
#include "worker/daemon/rank_launcher.h"

namespace tessera::worker {

enum class RankExitCause {
  kSucceeded,    // exit status 0
  kFailed,       // a non-zero exit status of its own
  kOutOfMemory,  // killed by its memory limit
  kSignaled,     // killed by a signal nobody in Tessera sent
  kStopped,      // stopped by the control plane (a stop, a preemption, a newer attempt)
  kFenced,       // killed by the worker itself for want of a lease
  kLost,         // the worker could not learn how it ended
};

// The cause of one rank's exit: what Tessera did to it first, then what the rank did.
RankExitCause ClassifyRankExit(const ExitInfo& exit, bool stopped, bool fenced, bool out_of_memory);
std::string_view RankExitCauseLabel(RankExitCause cause);

class WorkerEventMetrics {
 public:
  // The families in `registry`, registered once per registry.
  explicit WorkerEventMetrics(metrics::Registry& registry);
  // The process-wide registry's (what /metrics serves).
  static WorkerEventMetrics& Default();

  void RankStarted();
  void RankExited(RankExitCause cause);
  void GpuProbed();
  void GpuFault(v1::GpuFaultKind kind);

 private:
  metrics::Counter* rank_starts_;
  metrics::Family<metrics::Counter>* rank_exits_;
  metrics::Counter* gpu_probes_;
  metrics::Family<metrics::Counter>* gpu_faults_;
};

}  // namespace tessera::worker
