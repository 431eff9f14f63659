#pragma once
// The control plane's services, each built from its dependencies, so that tessera-server (all in
// one process) and the per-service binaries wire them the same way.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "base/clock.h"
#include "base/random.h"
#include "services/common/auth/api_keys.h"
#include "services/common/idempotency.h"
#include "services/common/system_client.h"
#include "services/common/system_credential.h"
#include "services/logs/log_quota.h"
#include "services/notify/notifier.h"
#include "services/runs/run_admission.h"
#include "services/runs/secret_box.h"
#include "services/store/stores.h"
#include "transport/channel_ref.h"
#include "transport/tls/certificate_authority.h"

namespace tessera::server {

// What every component needs.
struct Foundation {
  store::Stores stores;
  std::shared_ptr<Clock> clock;
  std::shared_ptr<Random> random;  // not for secrets
  std::shared_ptr<auth::Authenticator> authenticator;
  std::shared_ptr<IdempotentCalls> idempotency;
  // How long a call to another service waits (--service-call-timeout-seconds); zero: each
  // client's own default (10 to 30 s, by what the call does).
  absl::Duration service_call_timeout = absl::ZeroDuration();

  // `defaults` with the configured timeout, when one is.
  ServiceClientOptions CallOptions(ServiceClientOptions defaults) const {
    if (service_call_timeout > absl::ZeroDuration()) defaults.deadline = service_call_timeout;
    return defaults;
  }
};

Foundation MakeFoundation(store::Stores stores, std::shared_ptr<Clock> clock,
                          std::shared_ptr<Random> random = SystemRandom::Shared());

// A built component: its gRPC services and what runs in the background.
class Component {
 public:
  virtual ~Component() = default;
  virtual std::vector<grpc::Service*> services() = 0;
};

struct RunsOptions {
  // Signs the certificates of nodes that join (null: nodes get keys only, and their certificates
  // from the operator).
  std::shared_ptr<const tls::CertificateAuthority> ca;
  absl::Duration node_certificate_validity = absl::Hours(30 * 24);
  // The shortest hang_timeout a run may ask for.
  absl::Duration min_hang_timeout = absl::Seconds(60);
  bool allow_host_image = false;
  runs::AdmissionPolicy admission;  // waiting runs per user, who may use priority high
  // Seals users' secrets (--secrets-key-file); none: the cluster keeps no secrets.
  std::optional<runs::SecretBox> secrets_box;
  // Runs that ended this long ago are deleted with their logs (zero: kept).
  absl::Duration run_retention = absl::ZeroDuration();
  // The notifier (webhooks): its passes, deliveries and retention; its leader role is held by
  // one instance of the run manager, named `instance_id`.
  notify::NotifierOptions notifier;
  std::shared_ptr<notify::WebhookPoster> webhook_poster;  // null: libcurl's
  std::string instance_id;
};

// How often a retention of `period` is applied: a tenth of it, within 1 s and 10 minutes, so
// that nothing outlives its period by more than a tenth (or 10 minutes). Without a retention
// (zero) the pass only returns: every 10 minutes, not every second.
inline absl::Duration RetentionCheckInterval(absl::Duration period) {
  if (period <= absl::ZeroDuration()) return absl::Minutes(10);
  return std::clamp(period / 10, absl::Seconds(1), absl::Minutes(10));
}

// The run manager, the admin API and node joining; `scheduler` answers its submit-time fit
// checks and `logs` (null: no log service) deletes the logs of deleted runs.
std::unique_ptr<Component> MakeRunsComponent(const Foundation& f,
                                             std::shared_ptr<ChannelRef> scheduler,
                                             std::shared_ptr<ChannelRef> logs,
                                             const SystemCredential& system_key,
                                             const RunsOptions& options = {});

struct SchedulerOptions {
  absl::Duration lease = absl::Seconds(3);
  absl::Duration loss_after = absl::ZeroDuration();  // zero: the lease
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration cycle_interval = absl::Milliseconds(200);
  absl::Duration stop_grace = absl::Seconds(10);
  absl::Duration fair_share_half_life = absl::Hours(24 * 7);
  absl::Duration max_clock_skew = absl::Seconds(10);
  bool require_node_terms = false;
  absl::Duration shrink_after = absl::Seconds(60);
  int spares_per_pool = 0;
  // Empty: this instance always leads (single instance without election).
  std::string database_url;
  std::string instance_id;
};

// The scheduler and the workers' control stream; `runs` is the run manager's API, `health`
// (null: none) the health API that workers' hardware reports go to.
std::unique_ptr<Component> MakeSchedulerComponent(const Foundation& f,
                                                  std::shared_ptr<ChannelRef> runs,
                                                  std::shared_ptr<ChannelRef> health,
                                                  const SystemCredential& system_key,
                                                  const SchedulerOptions& options);

struct CordonOptions {
  // Node events older than this are removed (zero: kept).
  absl::Duration event_retention = absl::ZeroDuration();
};

// The cordon service.
std::unique_ptr<Component> MakeCordonComponent(const Foundation& f,
                                               const CordonOptions& options = {});

struct HealthOptions {
  absl::Duration sweep_interval = absl::ZeroDuration();
  int uncordon_after_passes = 3;
  // Suspects (nodes that look slow) are measured again until a sequential test decides, with
  // at most this chance of condemning a healthy node, and within this many pairs (then they are
  // inconclusive and measured again by a follow-up sweep); false: one sweep's figures decide.
  bool confirm_suspects = true;
  double false_condemnation_rate = 0.001;
  int confirmation_pairs = 16;
  double canary_compute_seconds = 1.0;
  int canary_compute_threads = 0;  // 0: all the node's cores
  absl::Duration canary_timeout = absl::Seconds(60);
  int mfu_reports = 3;
  double straggler_factor = 1.5;
  bool move_off_stragglers = true;
  absl::Duration tick = absl::Milliseconds(200);
  // All-reduce payloads between CPU nodes (empty: 1, 4, 16 and 64 MiB).
  std::vector<int64_t> cpu_payload_bytes;
  // The all-reduce canaries' rendezvous ports, [first, last] (0: HealthConfig's, 700-999).
  int canary_port_first = 0, canary_port_last = 0;
  // Unique among health API instances (host:pid): they elect one leader to sweep.
  std::string instance_id;
  // Sweeps (with their results) created longer ago than this are removed (zero: kept).
  absl::Duration sweep_retention = absl::ZeroDuration();
};

// The health API; it reaches the scheduler, the cordon service and the run manager through
// their APIs.
std::unique_ptr<Component> MakeHealthComponent(const Foundation& f,
                                               std::shared_ptr<ChannelRef> scheduler,
                                               std::shared_ptr<ChannelRef> cordon,
                                               std::shared_ptr<ChannelRef> runs,
                                               const SystemCredential& system_key,
                                               const HealthOptions& options);

struct LogsOptions {
  logs::LogQuotaOptions quota{};
  // Finished runs' logs are removed this long after their last line (zero: kept).
  absl::Duration retention = absl::ZeroDuration();
  // How often the retention is applied (RetentionCheckInterval of it, when set by the server).
  absl::Duration retention_check = absl::Minutes(10);
  // A database of the logs' own (--logs-database-url): its log store and the change feed that
  // wakes followers there. Null: the Foundation's, in the one database.
  std::shared_ptr<store::LogStore> store;
  std::shared_ptr<store::ChangeFeed> changes;
};

// The log service; `runs` is the run manager's API (for run names, owners and attempts).
std::unique_ptr<Component> MakeLogsComponent(const Foundation& f, std::shared_ptr<ChannelRef> runs,
                                             const SystemCredential& system_key,
                                             const LogsOptions& options = {});

}  // namespace tessera::server
