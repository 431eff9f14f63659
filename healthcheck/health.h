#pragma once
// The health API (HealthService): canary sweeps, GPU probe reports, hang reports, fault
// injection, and remediation. Its roles, wired by MakeHealth over shared state (the sweeps'
// neighbours, the deferred verdicts, the metrics):
//
//   HealthHandler  the RPCs (health_handler.h; the gRPC adapter is health_service.h)
//   SweepLauncher  makes every sweep: asked for, of ready nodes, of a suspect beside idle peers
//   SweepDriver    drives running sweeps through their stages and confirmation, finishes them
//   Remediation    cordons condemned nodes and evicts their runs, defers what a neighbour could
//                  have caused, returns nodes that pass
//   SweepTriggers  sweeps on a schedule, from the run watch (MFU drops, stragglers), of drained
//                  nodes once idle
//
// Tick(), called every few hundred milliseconds by the component's thread (on the elected
// instance only), advances the sweeps and then the triggers. Nodes the health API cordoned
// return after an operator uncordons them, or after passing `uncordon_after_passes` sweeps in a
// row when that is set.

#include <memory>

#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/random.h"
#include "healthcheck/health_clients.h"
#include "healthcheck/health_config.h"
#include "healthcheck/health_handler.h"
#include "healthcheck/remediation.h"
#include "healthcheck/sweep_driver.h"
#include "healthcheck/sweep_launcher.h"
#include "healthcheck/sweep_triggers.h"
#include "services/common/idempotency.h"
#include "services/store/health_store.h"
#include "transport/metrics/registry.h"

namespace tessera::health {

struct Health {
  std::shared_ptr<HealthHandler> handler;
  std::shared_ptr<SweepLauncher> launcher;
  std::shared_ptr<SweepDriver> driver;
  std::shared_ptr<Remediation> remediation;
  std::shared_ptr<SweepTriggers> triggers;

  // Drives sweeps, scheduled sweeps and the run watch; one at a time (a call while another runs
  // returns at once). Never blocks an RPC.
  void Tick();

  std::shared_ptr<absl::Mutex> tick_mu = std::make_shared<absl::Mutex>();
};

// `random` draws sweep ids and canary ports; `registry` (null: none) gets the health metrics.
Health MakeHealth(std::shared_ptr<store::HealthStore> store,
                  std::shared_ptr<SchedulerApi> scheduler, std::shared_ptr<CordonApi> cordon,
                  std::shared_ptr<RunsApi> runs, std::shared_ptr<IdempotentCalls> idem,
                  std::shared_ptr<Clock> clock, std::shared_ptr<Random> random, HealthConfig config,
                  metrics::Registry* registry = nullptr);

}  // namespace tessera::health
