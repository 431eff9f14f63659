#include "scheduler/service/scheduler.h"

namespace tessera::scheduler {

Scheduler MakeScheduler(std::shared_ptr<store::NodeStore> nodes, std::shared_ptr<RunsClient> runs,
                        std::shared_ptr<WorkerRegistry> workers,
                        std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<Clock> clock,
                        SchedulerConfig config, std::shared_ptr<HealthClient> health,
                        std::shared_ptr<Clock> lease_clock,
                        std::shared_ptr<store::ChangeFeed> changes, metrics::Registry* registry,
                        std::shared_ptr<store::TeamStore> teams,
                        std::shared_ptr<store::UsageStore> usage,
                        std::shared_ptr<store::JoinTokenStore> join_tokens) {
  Scheduler s;
  auto policy = std::make_shared<TeamPolicy>(std::move(teams), clock, absl::Seconds(5),
                                             std::move(usage), config.fair_share_half_life);
  s.attempts = std::make_shared<AttemptTracker>(clock, config.drain_limit());
  s.progress = std::make_shared<ProgressRelay>(runs, clock);
  s.control = std::make_shared<AttemptControl>(s.attempts, runs, workers, config, s.progress);
  auto leases = std::make_shared<LeaseTable>(lease_clock ? lease_clock : clock, config.Leases());
  s.leases = leases;
  auto desired = std::make_shared<DesiredAttempts>(clock, ResendAfter(config));
  auto metrics = registry ? std::make_shared<SchedulerMetrics>(*registry) : nullptr;
  s.sessions = std::make_shared<WorkerSessions>(nodes, runs, s.attempts, s.control, leases, desired,
                                                clock, config, metrics, std::move(join_tokens));
  auto liveness = std::make_shared<NodeLiveness>(nodes, leases, clock, config);
  s.spares = std::make_shared<SpareNodes>(nodes, runs, workers, s.control, clock, config);
  workers->SetAckListener(
      [spares = std::weak_ptr<SpareNodes>(s.spares)](const v1::CommandAck& ack) {
        if (auto held = spares.lock()) held->OnAck(ack);
      });
  s.cycle = std::make_shared<SchedulingCycle>(
      nodes, runs, workers, s.attempts, s.control, std::move(liveness), desired, clock, config,
      std::move(changes), std::move(metrics), policy, s.spares);
  s.node_api = std::make_shared<NodeApi>(nodes, runs, idem, policy, clock, config.shrink_after);
  s.health_relay = std::make_shared<HealthRelay>(std::move(health), std::move(workers), s.attempts,
                                                 s.control, std::move(idem));
  return s;
}

}  // namespace tessera::scheduler
