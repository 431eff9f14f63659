#include "services/runs/lifecycle_metrics.h"

#include <spdlog/spdlog.h>

#include <string>
#include <string_view>

#include "base/timestamps.h"
#include "proto/policy/run_status.h"
#include "transport/metrics/labels.h"
#include "transport/metrics/must_register.h"

namespace tessera::runs {

LifecycleMetrics::LifecycleMetrics(metrics::Registry& r)
    : ended_(metrics::MustRegister(r.AddCounter("tessera_runs_ended_total",
                                                "Runs that ended, by final status.", {"status"}))),
      recoveries_(metrics::MustRegister(r.AddCounter(
          "tessera_run_recoveries_total",
          "Attempts that ran after an earlier attempt of their run ended, by what ended it.",
          {"cause"}))),
      recovery_seconds_(metrics::MustRegister(r.AddHistogram(
          "tessera_run_recovery_seconds",
          "Seconds from an attempt's end to the next attempt of its run running, by what ended "
          "the first.",
          {"cause"}, {1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}))),
      goodput_(metrics::MustRegister(r.AddGauge(
          "tessera_run_goodput_ratio",
          "Goodput of each running run: effective training time over its wall time so far "
          "(time lost to interruptions and work redone since their checkpoints excluded).",
          {"run"}))),
      resumptions_(metrics::MustRegister(r.AddGauge(
          "tessera_run_resumptions",
          "Resumptions of each running run so far (its attempt index): one that climbs fast is "
          "in a recovery loop.",
          {"run"}))),
      cluster_goodput_(metrics::MustRegister(r.AddGauge(
          "tessera_cluster_goodput_ratio",
          "The running runs' goodput weighted by their GPUs: the cluster's effective training "
          "time ratio (ETTR). Absent while no run is running.",
          {}))) {
  // A family without labels starts with its one series at 0: absent until a refresh measures
  // it, so that no alert reads "the cluster trains nothing" from a run manager just started.
  SetClusterGoodput(std::nullopt);
}

void LifecycleMetrics::SetRunningRuns(const std::map<std::string, RunningRun>& by_name) {
  // Dropped first: nobody keeps a reference to these series.
  auto running = [&](const std::vector<std::string>& labels) {
    return by_name.contains(labels.at(0));
  };
  goodput_->RemoveUnless(running);
  resumptions_->RemoveUnless(running);
  for (const auto& [run, figures] : by_name) {
    goodput_->WithLabels({run}).Set(figures.goodput);
    resumptions_->WithLabels({run}).Set(figures.resumptions);
  }
}

void LifecycleMetrics::SetClusterGoodput(std::optional<double> goodput) {
  if (goodput) {
    cluster_goodput_->WithLabels().Set(*goodput);
  } else {
    cluster_goodput_->RemoveUnless([](const std::vector<std::string>&) { return false; });
  }
}

void LifecycleMetrics::Observe(const v1::Run& before, const v1::Run& after,
                               const std::vector<v1::Attempt>& attempts, absl::Time now) {
  if (!IsTerminal(before.status()) && IsTerminal(after.status())) {
    ended_->WithLabels({metrics::EnumLabel(v1::RunStatus_Name(after.status()), "RUN_STATUS_")})
        .Increment();
  }
  const bool began_running = after.status() == v1::RUN_STATUS_RUNNING &&
                             (before.status() != v1::RUN_STATUS_RUNNING ||
                              before.resumption_index() != after.resumption_index());
  if (!began_running || after.resumption_index() <= 0) return;
  for (const auto& earlier : attempts) {
    if (earlier.resumption_index() != after.resumption_index() - 1) continue;
    const std::string cause =
        metrics::EnumLabel(v1::AttemptEndReason_Name(earlier.end_reason()), "ATTEMPT_END_REASON_");
    recoveries_->WithLabels({cause}).Increment();
    if (earlier.has_ended_at()) {
      recovery_seconds_->WithLabels({cause}).Observe(
          std::max(0.0, absl::ToDoubleSeconds(now - FromProtoTime(earlier.ended_at()))));
    }
  }
}

}  // namespace tessera::runs
