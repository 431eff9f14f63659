#include "server/components.h"

#include <spdlog/spdlog.h>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "healthcheck/health.h"
#include "healthcheck/health_service.h"
#include "scheduler/service/scheduler_runner.h"
#include "scheduler/service/scheduler_service.h"
#include "scheduler/service/shell_service.h"
#include "services/admin/admin_handler.h"
#include "services/admin/admin_service.h"
#include "services/admin/join_service.h"
#include "services/admin/team_service.h"
#include "services/common/history_retention.h"
#include "services/common/leader_election.h"
#include "services/cordon/cordon_service.h"
#include "services/logs/log_service.h"
#include "services/notify/notification_service.h"
#include "services/runs/run_metrics_service.h"
#include "services/runs/run_service.h"
#include "services/runs/runs.h"
#include "services/runs/secret_service.h"
#include "services/store/fenced_node_store.h"
#include "transport/periodic_runner.h"

namespace tessera::server {

Foundation MakeFoundation(store::Stores stores, std::shared_ptr<Clock> clock,
                          std::shared_ptr<Random> random) {
  Foundation f;
  f.stores = std::move(stores);
  f.clock = clock;
  f.random = std::move(random);
  f.authenticator = std::make_shared<auth::Authenticator>(
      f.stores.api_keys, clock, absl::Seconds(5),
      std::make_shared<auth::AuditLog>(f.stores.audit, clock));
  f.idempotency = std::make_shared<IdempotentCalls>(f.stores.idempotency, clock);
  return f;
}

namespace {

// A history's retention (history_retention.h), applied in the background every tenth of its
// period by every instance: what is removed twice is simply gone.
class BackgroundRetention {
 public:
  BackgroundRetention(std::shared_ptr<Clock> clock, std::string what, absl::Duration period,
                      HistoryRetention::DeleteBefore delete_before)
      : retention_(what, period, clock, std::move(delete_before)),
        runner_(clock, RetentionCheckInterval(period), [this, what] {
          if (auto st = retention_.Apply(); !st.ok()) {
            spdlog::warn("retention of {}: {}", what, st.status().ToString());
          }
        }) {}

 private:
  HistoryRetention retention_;
  PeriodicRunner runner_;  // last: stopped before what it uses goes
};

class RunsComponent final : public Component {
 public:
  RunsComponent(const Foundation& f, std::shared_ptr<ChannelRef> scheduler,
                std::shared_ptr<ChannelRef> logs, const SystemCredential& system_key,
                const RunsOptions& o)
      : runs_roles_(runs::MakeRuns(runs::RunsDependencies{
            .runs = f.stores.runs,
            .idem = f.idempotency,
            .fit = runs::MakeGrpcFitChecker(scheduler, system_key,
                                            f.CallOptions(runs::kFitCheckerOptions)),
            .clock = f.clock,
            .logs = logs ? runs::MakeGrpcLogDeleter(logs, system_key,
                                                    f.CallOptions(runs::kLogDeleterOptions))
                         : nullptr,
            .random = f.random,
            .options = runs::RunManagerOptions{.min_hang_timeout = o.min_hang_timeout,
                                               .run_retention = o.run_retention,
                                               .allow_host_image = o.allow_host_image,
                                               .admission = o.admission},
            .changes = f.stores.changes,
            .registry = &metrics::Registry::Default(),
            .secrets = f.stores.secrets,
            .usage = f.stores.usage})),
        runs_(runs_roles_.manager, runs_roles_.reports, f.authenticator),
        metrics_(runs_roles_.manager, f.authenticator),
        secrets_(std::make_shared<runs::SecretManager>(f.stores.secrets, f.stores.runs,
                                                       o.secrets_box, f.clock),
                 f.authenticator),
        admin_(std::make_shared<admin::AdminHandler>(f.stores.api_keys, f.stores.join_tokens,
                                                     f.stores.audit, f.idempotency, f.clock),
               f.authenticator),
        teams_(std::make_shared<admin::TeamHandler>(f.stores.teams, f.clock, f.stores.usage),
               f.authenticator),
        join_(std::make_shared<admin::JoinHandler>(
                  f.stores.join_tokens, o.ca, f.clock,
                  admin::JoinOptions{.certificate_validity = o.node_certificate_validity}),
              f.authenticator),
        notifications_(
            std::make_shared<notify::NotificationHandler>(
                f.stores.notifications, f.stores.teams, SealerOf(o.secrets_box), f.clock, f.random),
            f.authenticator),
        // One instance plans and delivers notifications; the others answer calls.
        notifier_election_(f.stores.leader_locks, std::string(store::kNotifierLeaderRole),
                           o.instance_id.empty() ? "runs" : o.instance_id,
                           MonotonicClock::Shared()),
        notifier_(f.stores, o.webhook_poster ? o.webhook_poster : notify::MakeCurlWebhookPoster(),
                  SealerOf(o.secrets_box), f.clock, f.random, o.notifier,
                  [this] { return notifier_election_.Lead(); }),
        // max_duration is enforced by a timer; every instance may run it (changes are
        // compare-and-set).
        timer_(f.clock, absl::Seconds(1),
               [this] {
                 auto stopped = runs_roles_.upkeep->EnforceMaxDuration();
                 if (stopped.ok() && *stopped > 0)
                   spdlog::info("stopped {} run(s) past max_duration", *stopped);
               }),
        // Every instance may apply the retention: a run deleted twice is NOT_FOUND the second
        // time, which the pass skips.
        retention_(f.clock, RetentionCheckInterval(o.run_retention),
                   [this] {
                     auto deleted = runs_roles_.upkeep->ExpireFinishedRuns();
                     if (!deleted.ok())
                       spdlog::warn("runs: retention: {}", deleted.status().ToString());
                   }),
        // Goodput moves with time: the running runs' gauges are recomputed every 15 s (a
        // Prometheus scrape interval), not at each report.
        goodput_(f.clock, absl::Seconds(15), [this] {
          auto covered = runs_roles_.upkeep->RefreshRunningRunMetrics();
          if (!covered.ok()) spdlog::warn("runs: goodput metrics: {}", covered.status().ToString());
        }) {}
  std::vector<grpc::Service*> services() override {
    return {&runs_, &metrics_, &secrets_, &admin_, &teams_, &join_, &notifications_};
  }

 private:
  // Webhook secrets sealed with the users' secrets' key, bound to their subscription.
  static notify::Sealer SealerOf(const std::optional<runs::SecretBox>& box) {
    if (!box) return {};
    return notify::Sealer{
        .seal = [box = *box](
                    const std::string& plaintext,
                    const std::string& id) { return box.Seal(plaintext, "webhook/" + id); },
        .open = [box = *box](const std::string& sealed,
                             const std::string& id) { return box.Open(sealed, "webhook/" + id); }};
  }

  runs::Runs runs_roles_;
  runs::RunService runs_;
  runs::RunMetricsService metrics_;
  runs::SecretService secrets_;
  admin::AdminService admin_;
  admin::TeamService teams_;
  admin::JoinService join_;
  notify::NotificationService notifications_;
  LeaderElection notifier_election_;
  notify::Notifier notifier_;
  // The timers last: stopped before what they use goes.
  PeriodicRunner timer_;
  PeriodicRunner retention_;
  PeriodicRunner goodput_;
};

class SchedulerComponent final : public Component {
 public:
  SchedulerComponent(const Foundation& f, std::shared_ptr<ChannelRef> runs,
                     std::shared_ptr<ChannelRef> health, const SystemCredential& system_key,
                     const SchedulerOptions& o)
      : workers_(std::make_shared<scheduler::WorkerRegistry>()),
        election_(std::make_shared<LeaderElection>(
            o.database_url.empty() ? nullptr : f.stores.leader_locks,
            std::string(store::kSchedulerLeaderRole), o.instance_id, MonotonicClock::Shared())),
        scheduler_(scheduler::MakeScheduler(
            // Every write of the leader carries its term: a demoted leader changes nothing.
            store::MakeFencedNodeStore(f.stores.nodes, Fence()),
            scheduler::MakeGrpcRunsClient(runs, system_key, f.CallOptions({}), Fence()), workers_,
            f.idempotency, f.clock,
            scheduler::SchedulerConfig{.lease = o.lease,
                                       .loss_after = o.loss_after,
                                       .heartbeat_interval = o.heartbeat_interval,
                                       .stop_grace = o.stop_grace,
                                       .fair_share_half_life = o.fair_share_half_life,
                                       .max_clock_skew = o.max_clock_skew,
                                       .require_node_terms = o.require_node_terms,
                                       .shrink_after = o.shrink_after,
                                       .spares_per_pool = o.spares_per_pool},
            health ? scheduler::MakeGrpcHealthClient(health, system_key,
                                                     f.CallOptions(scheduler::kHealthClientOptions))
                   : nullptr,
            MonotonicClock::Shared(), f.stores.changes, &metrics::Registry::Default(),
            f.stores.teams, f.stores.usage, f.stores.join_tokens)),
        runner_(std::make_unique<scheduler::SchedulerRunner>(scheduler_.cycle, election_, f.clock,
                                                             o.cycle_interval, scheduler_.leases)),
        api_(
            scheduler_, f.authenticator, [this] { return election_->IsLeader(); }, o.instance_id),
        control_(
            scheduler_, workers_, f.authenticator, [this] { return election_->IsLeader(); },
            [this] { return election_->KeepsWorkers(); }),
        shells_(std::make_shared<scheduler::ShellHub>(
            scheduler_.attempts, scheduler::ShellHubOptions{},
            [random = f.random] {
              return absl::StrCat(absl::Hex(random->Next(), absl::kZeroPad16),
                                  absl::Hex(random->Next(), absl::kZeroPad16));
            })),
        shell_api_(shells_, f.authenticator, [this] { return election_->IsLeader(); }),
        shell_relay_(shells_, f.authenticator, [this] { return election_->IsLeader(); }) {}
  ~SchedulerComponent() override { runner_.reset(); }
  std::vector<grpc::Service*> services() override {
    return {&api_, &control_, &shell_api_, &shell_relay_};
  }

 private:
  store::FenceSource Fence() const {
    return [election = election_] { return election->Fence(); };
  }

  std::shared_ptr<scheduler::WorkerRegistry> workers_;
  std::shared_ptr<LeaderElection> election_;
  scheduler::Scheduler scheduler_;
  std::unique_ptr<scheduler::SchedulerRunner> runner_;
  scheduler::SchedulerService api_;
  scheduler::WorkerControlService control_;
  std::shared_ptr<scheduler::ShellHub> shells_;
  scheduler::ShellService shell_api_;
  scheduler::ShellRelayService shell_relay_;
};

class CordonComponent final : public Component {
 public:
  CordonComponent(const Foundation& f, const CordonOptions& o)
      : service_(std::make_shared<cordon::CordonHandler>(f.stores.nodes, f.stores.node_events,
                                                         f.idempotency, f.clock, f.stores.changes),
                 f.authenticator),
        retention_(f.clock, "node events", o.event_retention,
                   [events = f.stores.node_events](absl::Time before, int limit) {
                     return events->DeleteNodeEventsBefore(before, limit);
                   }) {}
  std::vector<grpc::Service*> services() override { return {&service_}; }

 private:
  cordon::CordonService service_;
  BackgroundRetention retention_;
};

class HealthComponent final : public Component {
 public:
  HealthComponent(const Foundation& f, std::shared_ptr<ChannelRef> scheduler,
                  std::shared_ptr<ChannelRef> cordon, std::shared_ptr<ChannelRef> runs,
                  const SystemCredential& system_key, const HealthOptions& o)
      : health_(health::MakeHealth(
            f.stores.health,
            health::MakeGrpcSchedulerApi(scheduler, system_key,
                                         f.CallOptions(health::kHealthClientOptions)),
            health::MakeGrpcCordonApi(cordon, system_key,
                                      f.CallOptions(health::kHealthClientOptions)),
            health::MakeGrpcRunsApi(runs, system_key, f.CallOptions(health::kHealthClientOptions)),
            f.idempotency, f.clock, f.random, ConfigFrom(o), &metrics::Registry::Default())),
        service_(health_.handler, f.authenticator),
        // One health API instance sweeps and remediates; the others answer calls and stand by.
        election_(f.stores.leader_locks, std::string(store::kHealthLeaderRole), o.instance_id,
                  MonotonicClock::Shared()),
        ticker_(f.clock, o.tick,
                [this] {
                  if (election_.Lead()) health_.Tick();
                }),
        // A running sweep is never removed.
        retention_(f.clock, "health sweeps", o.sweep_retention,
                   [health = f.stores.health](absl::Time before, int limit) {
                     return health->DeleteSweepsBefore(before, limit);
                   }) {}
  std::vector<grpc::Service*> services() override { return {&service_}; }

 private:
  static health::HealthConfig ConfigFrom(const HealthOptions& o) {
    health::HealthConfig c;
    c.triggers.sweep_interval = o.sweep_interval;
    c.uncordon_after_passes = o.uncordon_after_passes;
    c.anomaly.confirmation.enabled = o.confirm_suspects;
    c.anomaly.confirmation.test.alpha = o.false_condemnation_rate;
    c.anomaly.confirmation.test.max_pairs = o.confirmation_pairs;
    c.canary.compute_seconds = o.canary_compute_seconds;
    c.canary.compute_threads = o.canary_compute_threads;
    c.canary.compute_timeout = o.canary_timeout;
    c.canary.allreduce_timeout = o.canary_timeout;
    c.triggers.watch.mfu_reports = o.mfu_reports;
    c.triggers.watch.straggler_factor = o.straggler_factor;
    c.triggers.moves.enabled = o.move_off_stragglers;
    if (!o.cpu_payload_bytes.empty()) c.canary.cpu_payload_bytes = o.cpu_payload_bytes;
    if (o.canary_port_first > 0) {
      c.port_base = o.canary_port_first;
      c.port_span = o.canary_port_last - o.canary_port_first + 1;
    }
    return c;
  }
  health::Health health_;
  health::HealthService service_;
  LeaderElection election_;
  PeriodicRunner ticker_;  // stopped before what it uses goes
  BackgroundRetention retention_;
};

class LogsComponent final : public Component {
 public:
  LogsComponent(const Foundation& f, std::shared_ptr<ChannelRef> runs,
                const SystemCredential& system_key, const LogsOptions& o)
      : handler_(std::make_shared<logs::LogHandler>(
            o.store ? o.store : f.stores.logs,
            logs::MakeGrpcRunLookup(std::move(runs), system_key,
                                    f.CallOptions(logs::kRunLookupOptions)),
            f.clock, logs::LogHandlerOptions{.quota = o.quota, .retention = o.retention},
            metrics::Registry::Default(), o.store ? o.changes : f.stores.changes)),
        service_(handler_, f.authenticator),
        // Every instance may apply the retention: removing a run's logs twice is harmless.
        retention_(f.clock, o.retention_check, [this] {
          auto expired = handler_->ExpireOldLogs();
          if (!expired.ok()) spdlog::warn("logs: retention: {}", expired.status().ToString());
        }) {}
  std::vector<grpc::Service*> services() override { return {&service_}; }

 private:
  std::shared_ptr<logs::LogHandler> handler_;
  logs::LogService service_;
  PeriodicRunner retention_;  // last: stopped before what it uses goes
};

}  // namespace

std::unique_ptr<Component> MakeRunsComponent(const Foundation& f,
                                             std::shared_ptr<ChannelRef> scheduler,
                                             std::shared_ptr<ChannelRef> logs,
                                             const SystemCredential& system_key,
                                             const RunsOptions& options) {
  return std::make_unique<RunsComponent>(f, std::move(scheduler), std::move(logs), system_key,
                                         options);
}

std::unique_ptr<Component> MakeLogsComponent(const Foundation& f, std::shared_ptr<ChannelRef> runs,
                                             const SystemCredential& system_key,
                                             const LogsOptions& options) {
  return std::make_unique<LogsComponent>(f, std::move(runs), system_key, options);
}

std::unique_ptr<Component> MakeSchedulerComponent(const Foundation& f,
                                                  std::shared_ptr<ChannelRef> runs,
                                                  std::shared_ptr<ChannelRef> health,
                                                  const SystemCredential& system_key,
                                                  const SchedulerOptions& options) {
  return std::make_unique<SchedulerComponent>(f, std::move(runs), std::move(health), system_key,
                                              options);
}

std::unique_ptr<Component> MakeHealthComponent(const Foundation& f,
                                               std::shared_ptr<ChannelRef> scheduler,
                                               std::shared_ptr<ChannelRef> cordon,
                                               std::shared_ptr<ChannelRef> runs,
                                               const SystemCredential& system_key,
                                               const HealthOptions& options) {
  return std::make_unique<HealthComponent>(f, std::move(scheduler), std::move(cordon),
                                           std::move(runs), system_key, options);
}

std::unique_ptr<Component> MakeCordonComponent(const Foundation& f, const CordonOptions& options) {
  return std::make_unique<CordonComponent>(f, options);
}

}  // namespace tessera::server
