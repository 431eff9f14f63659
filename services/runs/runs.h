#pragma once
// The run service's roles, wired by MakeRuns: RunManager (people's calls), RunReports (what
// Tessera's components report) and RunUpkeep (what the service does on its own, on timers),
// writing through one RunWriter and sharing one ClusterReliability. RunsComponent
// (server/components.cc) serves and times them; tests make them the same way.

#include <memory>

#include "base/clock.h"
#include "base/random.h"
#include "services/common/idempotency.h"
#include "services/runs/cluster_reliability.h"
#include "services/runs/fit_checker.h"
#include "services/runs/log_deleter.h"
#include "services/runs/run_manager.h"
#include "services/runs/run_reports.h"
#include "services/runs/run_upkeep.h"
#include "services/runs/run_writer.h"
#include "services/store/change_feed.h"
#include "services/store/run_store.h"
#include "services/store/secret_store.h"
#include "services/store/usage_store.h"

namespace tessera::runs {

struct RunsDependencies {
  std::shared_ptr<store::RunStore> runs = nullptr;
  std::shared_ptr<IdempotentCalls> idem = nullptr;
  std::shared_ptr<FitChecker> fit = nullptr;
  std::shared_ptr<Clock> clock = nullptr;
  // Deletes deleted and expired runs' logs; null: no log service.
  std::shared_ptr<LogDeleter> logs = nullptr;
  // Draws run ids and names' suffixes.
  std::shared_ptr<Random> random = SystemRandom::Shared();
  RunManagerOptions options = {};
  // Wakes watches when runs' events commit; null: watches poll.
  std::shared_ptr<store::ChangeFeed> changes = nullptr;
  // Where the lifecycle's metrics go; null: none.
  metrics::Registry* registry = nullptr;
  // The users' secrets, which admission checks a run's references against; null: none.
  std::shared_ptr<store::SecretStore> secrets = nullptr;
  // The cluster's usage, for its interruptions and running goodput (describe); null: neither.
  std::shared_ptr<store::UsageStore> usage = nullptr;
};

struct Runs {
  std::shared_ptr<RunManager> manager;
  std::shared_ptr<RunReports> reports;
  std::shared_ptr<RunUpkeep> upkeep;
};

Runs MakeRuns(RunsDependencies deps);

}  // namespace tessera::runs
