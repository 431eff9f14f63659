#pragma once
// How often the cluster's hardware interrupts training, and how much of their time its running
// runs train: what `mcli describe run` advises a checkpoint interval from, and the cluster's
// ETTR beside a run's goodput. The interruptions are read from the attempts' usage over the last
// week at most once a minute (a describe must not scan a week of attempts each time).

#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "services/runs/describe.h"
#include "services/store/usage_store.h"

namespace tessera::runs {

// A hardware fault of a node, a GPU or the job (not a preemption, a stop or Tessera's own).
bool IsHardwareInterruption(v1::AttemptEndReason reason);

// The figures of `attempts` over [since, until): their hardware interruptions and GPU-hours.
ReliabilityFigures ReliabilityOf(const std::vector<store::AttemptUsage>& attempts, absl::Time since,
                                 absl::Time until);

class ClusterReliability {
 public:
  ClusterReliability(std::shared_ptr<store::UsageStore> usage, std::shared_ptr<Clock> clock,
                     absl::Duration window = absl::Hours(24 * 7),
                     absl::Duration refresh = absl::Minutes(1));

  // The figures of the last `window`, read again once `refresh` has passed; the store's error
  // when it has never answered.
  absl::StatusOr<ReliabilityFigures> Figures();

  // The running runs' goodput weighted by their GPUs, as last measured (RunManager's refresh of
  // the running runs' metrics sets it; nullopt: no run is running).
  void SetRunningGoodput(std::optional<double> goodput);
  std::optional<double> running_goodput() const;

 private:
  const std::shared_ptr<store::UsageStore> usage_;
  const std::shared_ptr<Clock> clock_;
  const absl::Duration window_;
  const absl::Duration refresh_;
  mutable absl::Mutex mu_;
  std::optional<ReliabilityFigures> figures_ ABSL_GUARDED_BY(mu_);
  absl::Time read_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::optional<double> running_goodput_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::runs
