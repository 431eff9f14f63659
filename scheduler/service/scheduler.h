#pragma once
// The scheduler service's roles, wired together over one shared attempt tracker:
//
//   WorkerSessions   the workers' control streams: registration, heartbeats, attempt reports
//   LeaseTable       the nodes' leases, in the leader's memory (renewed by heartbeats)
//   NodeLiveness     leases to stored liveness: lost nodes, flap damping, last heartbeats
//   SchedulingCycle  the leader's cycle: admit, expire leases, send stops, place
//   NodeApi          the SchedulerService's node, queue and fit calls
//   HealthRelay      hardware reports to the health API, its commands to workers, evictions
//   ProgressRelay    the workers' progress to the run manager, kept while it is away
//   AttemptControl   stopping and ending attempts, for all of the above
//   AttemptTracker   what this instance knows of active and draining attempts
//
// The gRPC adapters (scheduler_service.h) and the runner (scheduler_runner.h) take the roles
// they need from here.

#include <memory>

#include "base/clock.h"
#include "scheduler/service/attempt_control.h"
#include "scheduler/service/attempt_tracker.h"
#include "scheduler/service/health_client.h"
#include "scheduler/service/health_relay.h"
#include "scheduler/service/lease_table.h"
#include "scheduler/service/node_api.h"
#include "scheduler/service/progress_relay.h"
#include "scheduler/service/runs_client.h"
#include "scheduler/service/scheduler_config.h"
#include "scheduler/service/scheduling_cycle.h"
#include "scheduler/service/worker_registry.h"
#include "scheduler/service/worker_sessions.h"
#include "services/common/idempotency.h"
#include "services/store/change_feed.h"
#include "services/store/node_store.h"
#include "services/store/team_store.h"

namespace tessera::scheduler {

struct Scheduler {
  std::shared_ptr<AttemptTracker> attempts;
  std::shared_ptr<AttemptControl> control;
  std::shared_ptr<WorkerSessions> sessions;
  std::shared_ptr<SchedulingCycle> cycle;
  std::shared_ptr<NodeApi> node_api;
  std::shared_ptr<HealthRelay> health_relay;
  std::shared_ptr<ProgressRelay> progress;
  // The pools' hot spares (SchedulerConfig::spares_per_pool); the cycle keeps them.
  std::shared_ptr<SpareNodes> spares;
  // The leader's leases: how soon the next one ends tells its cycle when to run at the latest.
  std::shared_ptr<LeaseTable> leases;
};

// `health` may be null: no health API. `idem` records the mutating API calls by their keys.
// `clock` gives the times stored and shown; `lease_clock` measures leases (a monotonic clock in
// production; null: `clock`, as tests on one fake clock want). `changes`: the store's change feed
// (null: the cycle reads every node every cycle). `registry`: where the leader's cluster metrics
// go (cluster_metrics.h; null: none). `teams`: the teams' quotas and shares, `usage`: the GPU
// usage fair share decays (team_policy.h; null: no quotas, no fair share).
Scheduler MakeScheduler(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
                        std::shared_ptr<WorkerRegistry> workers,
                        std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<Clock> clock,
                        SchedulerConfig config, std::shared_ptr<HealthClient> health = nullptr,
                        std::shared_ptr<Clock> lease_clock = nullptr,
                        std::shared_ptr<store::ChangeFeed> changes = nullptr,
                        metrics::Registry* registry = nullptr,
                        std::shared_ptr<store::TeamStore> teams = nullptr,
                        std::shared_ptr<store::UsageStore> usage = nullptr,
                        std::shared_ptr<store::JoinTokenStore> join_tokens = nullptr);

}  // namespace tessera::scheduler
