#include "services/server/serve.h"

#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/byte_size.h"
#include "services/admin/admin_handler.h"
#include "services/common/auth/rpc_roles.h"
#include "services/common/auth/system_keys.h"
#include "services/common/endpoints.h"
#include "services/common/grpc_limits.h"
#include "services/common/metrics/db_metrics.h"
#include "services/common/periodic_runner.h"
#include "services/common/service_host.h"
#include "services/common/tls/grpc_credentials.h"
#include "services/gateway/gateway_server.h"
#include "services/server/caller_limits_flags.h"
#include "services/server/components.h"
#include "services/server/direct_commands.h"
#include "services/server/gateway_flags.h"
#include "services/server/health_flags.h"
#include "services/server/logs_flags.h"
#include "services/server/peer_endpoints.h"
#include "services/server/runs_flags.h"
#include "services/server/scheduler_flags.h"

namespace tessera::server {
namespace {

int Fail(const absl::Status& st) {
  std::cerr << "Error: " << st.message() << "\n";
  return absl::IsInvalidArgument(st) ? 2 : 1;
}

// Names this process among instances of its services: host:pid.
std::string InstanceId() {
  char hostname[256] = "";
  gethostname(hostname, sizeof(hostname) - 1);
  return absl::StrCat(hostname, ":", getpid());
}

// `endpoint` was checked by GrpcTarget (ValidateEndpoints) before.
std::shared_ptr<ChannelRef> RemoteChannel(const std::string& endpoint, const tls::TlsFlags& tls) {
  return std::make_shared<ChannelRef>(CreateLimitedChannel(
      GrpcTarget("endpoint", endpoint).value_or(endpoint), tls::ChannelCredentials(tls)));
}

// One channel per instance of a service that has a leader (the scheduler), so that a call a
// standby refuses goes on to the next instance (SystemClient).
std::shared_ptr<ChannelRef> LeaderChannel(const std::string& endpoints, const tls::TlsFlags& tls) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& e : SplitEndpoints(endpoints)) {
    channels.push_back(CreateLimitedChannel(e, tls::ChannelCredentials(tls)));
  }
  return std::make_shared<ChannelRef>(std::move(channels));
}

}  // namespace

int ServeMain(const Parts& parts, int argc, char** argv) {
  BlockTerminationSignals();
  TurnOffLockOrderChecks();
  CLI::App app{parts.description, parts.binary};
  HostOptions host;
  store::PostgresOptions db;
  SchedulerFlags sched_flags;
  LogsFlags logs_flags;
  DirectCommands direct;
  PeerEndpoints peers;
  const bool all_in_one =
      parts.runs && parts.scheduler && parts.cordon && parts.logs && parts.health;
  HealthFlags health_flags;
  GatewayFlags rest_flags;
  if (!all_in_one) rest_flags.http_listen.clear();
  AddHostFlags(app, host);
  app.add_option("--database-url", db.url, "PostgreSQL URL (postgresql://user@host:port/db)")
      ->envname("TESSERA_DATABASE_URL");
  app.add_option("--database-pool-size", db.pool_size, "connections kept open")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--database-control-connections", db.control_connections,
                 "of those, how many only Tessera's own components (system keys, the "
                 "scheduler's and health API's loops) use; people's calls use the rest")
      ->capture_default_str()
      ->check(CLI::Range(0, 255));
  CallerLimitsFlags limits;
  AddCallerLimitsFlags(app, limits);
  if (parts.scheduler) AddSchedulerFlags(app, sched_flags);
  if (all_in_one) AddGatewayFlags(app, rest_flags);
  AddPeerEndpointFlags(app, parts, peers);
  double node_event_retention_days = 0;
  if (parts.cordon) {
    app.add_option("--node-event-retention-days", node_event_retention_days,
                   "remove node events (cordons, losses, faults) this many days after they "
                   "happened (0: keep them)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 36500.0));
  }
  if (parts.health) AddHealthFlags(app, health_flags);
  std::string ca_key_file, secrets_key_file;
  double system_key_lifetime_minutes = 60;
  if (parts.runs) {
    app.add_option("--secrets-key-file", secrets_key_file,
                   "a file (mode 600) holding the 32-byte key, as 64 hex digits (openssl rand "
                   "-hex 32), that users' secrets are encrypted with at rest (without it, the "
                   "cluster keeps no secrets)")
        ->envname("TESSERA_SECRETS_KEY_FILE");
    app.add_option("--tls-ca-key", ca_key_file,
                   "PEM private key of the cluster CA (--tls-ca): nodes that join get a "
                   "certificate signed with it (without it, only a node key)")
        ->envname("TESSERA_TLS_CA_KEY");
  }
  RunsFlags runs_flags;
  if (parts.runs) AddRunsFlags(app, runs_flags);
  if (parts.logs) AddLogsFlags(app, logs_flags);
  app.add_option("--system-key-lifetime-minutes", system_key_lifetime_minutes,
                 "this process's own key for calls to the other services expires after this "
                 "long, and is replaced every third of it")
      ->capture_default_str()
      ->check(CLI::Range(3.0, 7.0 * 24 * 60));

  AddDirectCommands(app, direct);
  CLI11_PARSE(app, argc, argv);

  if (auto st = ConfigureLogging(host.log_level); !st.ok()) return Fail(st);
  if (auto st = CheckPeerEndpoints(peers); !st.ok()) return Fail(st);
  if (db.url.empty()) {
    return Fail(absl::InvalidArgumentError("--database-url is required (or TESSERA_DATABASE_URL)"));
  }
  if (!direct.parsed()) {
    std::vector<tls::NamedAddress> addresses = {{"--grpc-listen", host.grpc_listen},
                                                {"--metrics-listen", host.metrics_listen},
                                                {"--http-listen", rest_flags.http_listen}};
    for (auto& peer : peers.Named()) addresses.push_back(std::move(peer));
    if (auto st = tls::CheckTlsFlags(host.tls, addresses); !st.ok()) {
      return Fail(st);
    }
  }
  db.observer = metrics::MakeDbMetrics(metrics::Registry::Default());
  auto stores = store::OpenPostgresStores(db);
  if (!stores.ok()) {
    return Fail(absl::Status(stores.status().code(), absl::StrCat("cannot open the database: ",
                                                                  stores.status().message())));
  }
  auto clock = SystemClock::Shared();

  if (direct.parsed()) return RunDirectCommand(direct, *stores, *clock);

  RunsOptions runs_options = FinishRunsFlags(runs_flags);
  auto logs_options = FinishLogsFlags(logs_flags, db);
  if (!logs_options.ok()) return Fail(logs_options.status());
  if (!secrets_key_file.empty()) {
    auto box = runs::SecretBox::FromKeyFile(secrets_key_file);
    if (!box.ok()) return Fail(box.status());
    runs_options.secrets_box = *std::move(box);
  }
  if (!ca_key_file.empty()) {
    if (host.tls.ca_file.empty()) {
      return Fail(absl::InvalidArgumentError("--tls-ca-key needs --tls-ca (the CA's certificate)"));
    }
    auto ca = tls::CertificateAuthority::Load(host.tls.ca_file, ca_key_file);
    if (!ca.ok()) return Fail(ca.status());
    runs_options.ca = *std::move(ca);
  }

  Foundation f = MakeFoundation(*stores, clock);
  ApplyCallerLimits(limits, f);
  auto keys = auth::SystemKeys::Create(f.stores.api_keys, clock, parts.binary,
                                       absl::Minutes(system_key_lifetime_minutes));
  if (!keys.ok()) return Fail(keys.status());
  PeriodicRunner rotation(clock, absl::Seconds(10), [&keys] { (*keys)->Tick(); });
  const SystemCredential system_key = (*keys)->credential();

  // Services reach the ones in this process through the server's in-process channel (filled
  // in once the server runs) and the others through their endpoints.
  auto self = std::make_shared<ChannelRef>();
  std::vector<std::unique_ptr<Component>> components;
  if (parts.runs) {
    std::shared_ptr<ChannelRef> logs = parts.logs ? self : nullptr;
    if (!parts.logs && !peers.logs.empty()) logs = RemoteChannel(peers.logs, host.tls);
    runs_options.instance_id = InstanceId();
    components.push_back(
        MakeRunsComponent(f, parts.scheduler ? self : LeaderChannel(peers.scheduler, host.tls),
                          logs, system_key, runs_options));
  }
  if (parts.scheduler) {
    SchedulerOptions sched = FinishSchedulerFlags(sched_flags);
    sched.database_url = db.url;
    sched.instance_id = InstanceId();
    std::shared_ptr<ChannelRef> health_channel = parts.health ? self : nullptr;
    if (!parts.health && !peers.health.empty())
      health_channel = RemoteChannel(peers.health, host.tls);
    components.push_back(
        MakeSchedulerComponent(f, parts.runs ? self : RemoteChannel(peers.runs, host.tls),
                               health_channel, system_key, sched));
  }
  if (parts.cordon) {
    components.push_back(MakeCordonComponent(
        f, CordonOptions{.event_retention = absl::Seconds(node_event_retention_days * 86400)}));
  }
  if (parts.health) {
    auto health = FinishHealthFlags(std::move(health_flags));
    if (!health.ok()) return Fail(health.status());
    health->instance_id = InstanceId();
    components.push_back(MakeHealthComponent(
        f, parts.scheduler ? self : LeaderChannel(peers.scheduler, host.tls),
        parts.cordon ? self : RemoteChannel(peers.cordon, host.tls),
        parts.runs ? self : RemoteChannel(peers.runs, host.tls), system_key, *health));
  }
  if (parts.logs) {
    components.push_back(MakeLogsComponent(
        f, parts.runs ? self : RemoteChannel(peers.runs, host.tls), system_key, *logs_options));
  }

  std::vector<grpc::Service*> services;
  for (auto& c : components) {
    for (auto* s : c->services()) services.push_back(s);
  }
  grpc::EnableDefaultHealthCheckService(true);
  auto served = ServiceHost::Start(host, services);
  if (!served.ok()) return Fail(served.status());
  self->Set((*served)->InProcessChannel());
  // The REST gateway reaches the services through the same in-process channel.
  auto rest = StartGateway(rest_flags, **served);
  if (!rest.ok()) return Fail(rest.status());
  // Tests and scripts read this line to learn the ports.
  // One write, so that no other thread's output lands inside it.
  std::cout << absl::StrCat("listening grpc=", (*served)->grpc_port(),
                            " metrics=", (*served)->metrics_port(),
                            " http=", *rest ? (*rest)->port() : 0, "\n")
            << std::flush;
  (*served)->RunUntilSignal();
  if (*rest) (*rest)->Shutdown();
  components.clear();
  return 0;
}

}  // namespace tessera::server
