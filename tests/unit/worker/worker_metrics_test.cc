// The worker's counters of ranks and GPU probes: the cause given to each way a rank can end,
// and the families as /metrics shows them.
#include "worker/daemon/worker_metrics.h"

#include <signal.h>

#include <catch2/catch.hpp>

#include "tests/support/metric_values.h"

namespace tessera::worker {
namespace worker_metrics_test {

ExitInfo Exited(int code) { return ExitInfo{.exit_code = code, .signal = 0, .status_lost = false}; }
ExitInfo Killed(int signal) {
  return ExitInfo{.exit_code = -1, .signal = signal, .status_lost = false};
}

std::string Cause(const ExitInfo& e, bool stopped = false, bool fenced = false, bool oom = false) {
  return std::string(RankExitCauseLabel(ClassifyRankExit(e, stopped, fenced, oom)));
}

TEST_CASE("each way a rank ends has its cause", "[worker][metrics]") {
  CHECK(Cause(Exited(0)) == "succeeded");
  CHECK(Cause(Exited(1)) == "failed");
  CHECK(Cause(Exited(137)) == "failed");  // a status of its own, even one that looks like a kill
  CHECK(Cause(Killed(SIGSEGV)) == "signaled");
  CHECK(Cause(Killed(SIGKILL), false, false, true) == "out_of_memory");
  // Stopped by the control plane: however the rank reacted to SIGTERM.
  CHECK(Cause(Killed(SIGTERM), true) == "stopped");
  CHECK(Cause(Exited(0), true) == "stopped");
  CHECK(Cause(Exited(143), true) == "stopped");
  // Fenced: killed by the worker; a rank that had already exited on its own keeps its cause.
  CHECK(Cause(Killed(SIGKILL), false, true) == "fenced");
  CHECK(Cause(Exited(0), false, true) == "succeeded");
  ExitInfo lost;
  lost.status_lost = true;
  CHECK(Cause(lost, true, true, true) == "lost");
}

TEST_CASE("rank and GPU probe counters", "[worker][metrics]") {
  metrics::Registry registry;
  WorkerEventMetrics m(registry);
  m.RankStarted();
  m.RankStarted();
  m.RankExited(RankExitCause::kFailed);
  m.RankExited(RankExitCause::kOutOfMemory);
  m.RankExited(RankExitCause::kFailed);
  m.GpuProbed();
  m.GpuFault(v1::GPU_FAULT_KIND_XID);
  m.GpuFault(v1::GPU_FAULT_KIND_FELL_OFF_BUS);
  m.GpuFault(v1::GPU_FAULT_KIND_XID);
  using testing::MetricValue;
  CHECK(MetricValue(registry, "tessera_worker_rank_starts_total") == 2);
  CHECK(MetricValue(registry, "tessera_worker_rank_exits_total", {"failed"}) == 2);
  CHECK(MetricValue(registry, "tessera_worker_rank_exits_total", {"out_of_memory"}) == 1);
  CHECK_FALSE(MetricValue(registry, "tessera_worker_rank_exits_total", {"succeeded"}));
  CHECK(MetricValue(registry, "tessera_worker_gpu_probes_total") == 1);
  CHECK(MetricValue(registry, "tessera_worker_gpu_faults_total", {"XID"}) == 2);
  CHECK(MetricValue(registry, "tessera_worker_gpu_faults_total", {"FELL_OFF_BUS"}) == 1);
}

}  // namespace worker_metrics_test
}  // namespace tessera::worker
