#include "healthcheck/health.h"

namespace tessera::health {

void Health::Tick() {
  if (!tick_mu->TryLock()) return;
  const auto sweeps = driver->AdvanceRunning();
  triggers->Tick(sweeps);
  tick_mu->Unlock();
}

Health MakeHealth(std::shared_ptr<store::HealthStore> store,
                  std::shared_ptr<SchedulerApi> scheduler, std::shared_ptr<CordonApi> cordon,
                  std::shared_ptr<RunsApi> runs, std::shared_ptr<IdempotentCalls> idem,
                  std::shared_ptr<Clock> clock, std::shared_ptr<Random> random, HealthConfig config,
                  metrics::Registry* registry) {
  auto metrics = registry != nullptr ? std::make_shared<HealthMetrics>(*registry) : nullptr;
  auto neighbours = std::make_shared<SweepNeighbours>(runs);
  auto deferred = std::make_shared<DeferredVerdicts>(cordon, metrics);
  Health h;
  h.launcher = std::make_shared<SweepLauncher>(store, scheduler, clock, random);
  h.remediation = std::make_shared<Remediation>(store, scheduler, cordon, runs, neighbours,
                                                deferred, metrics, config.uncordon_after_passes);
  h.driver = std::make_shared<SweepDriver>(store, scheduler, clock, random, config, neighbours,
                                           h.launcher, h.remediation, metrics);
  auto moves = std::make_shared<StragglerMoves>(scheduler, clock, config.triggers.moves,
                                                config.triggers.watch.straggler_factor);
  h.triggers = std::make_shared<SweepTriggers>(scheduler, runs, h.launcher, deferred,
                                               std::move(moves), clock, config.triggers);
  h.handler = std::make_shared<HealthHandler>(store, scheduler, runs, idem, clock, h.launcher,
                                              h.remediation, std::move(config));
  return h;
}

}  // namespace tessera::health
