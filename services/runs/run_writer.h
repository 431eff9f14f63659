#pragma once
// Every change of a run goes through a RunWriter: the freshest copy of the run is read with its
// attempts, the change applied to it, and the write made compare-and-set, tried again when
// another writer won (cas_retry.h); each write is observed by the lifecycle's metrics. Also the
// reads of a run as a caller may see or change it. RunManager (people's calls), RunReports (what
// Tessera's components report) and RunUpkeep (what the service does on its own) share one, made
// by MakeRuns (runs.h).

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/runs/lifecycle.h"
#include "services/runs/lifecycle_metrics.h"
#include "services/store/run_store.h"
#include "services/store/write_fence.h"

namespace tessera::runs {

class RunWriter {
 public:
  using Change =
      std::function<absl::StatusOr<Transition>(const v1::Run&, const std::vector<v1::Attempt>&)>;

  // `registry`: where the lifecycle's metrics go (null: none).
  RunWriter(std::shared_ptr<store::RunStore> runs, std::shared_ptr<Clock> clock,
            metrics::Registry* registry);

  // The run by name as `who` may see it: NOT_FOUND for other users' runs (their names say
  // nothing either).
  absl::StatusOr<v1::Run> ReadVisible(const auth::Principal& who, const std::string& name) const;
  // ReadVisible, and PERMISSION_DENIED when `who` may see the run but not change it.
  absl::StatusOr<v1::Run> ReadChangeable(const auth::Principal& who, const std::string& name) const;
  // Applies `change` to the freshest copy of the run, retrying when another writer wins. A
  // `fence` makes the write one of a leader's term (refused once that term ended); `idem` is
  // recorded with the write (a change that changes nothing writes and records nothing).
  absl::StatusOr<v1::Run> Mutate(const std::string& run_id, const Change& change,
                                 const std::optional<store::WriteFence>& fence = {},
                                 const std::optional<store::IdempotentRunWrite>& idem = {}) const;

  // The lifecycle's metrics; null without a registry.
  LifecycleMetrics* metrics() const { return metrics_.get(); }

 private:
  const std::shared_ptr<store::RunStore> runs_;
  const std::shared_ptr<Clock> clock_;
  const std::unique_ptr<LifecycleMetrics> metrics_;
};

}  // namespace tessera::runs
