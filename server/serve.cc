#include "server/serve.h"

#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/byte_size.h"
#include "base/status_macros.h"
#include "server/caller_limits_flags.h"
#include "server/components.h"
#include "server/direct_commands.h"
#include "server/gateway_flags.h"
#include "server/health_flags.h"
#include "server/logs_flags.h"
#include "server/peer_endpoints.h"
#include "server/runs_flags.h"
#include "server/scheduler_flags.h"
#include "services/admin/admin_handler.h"
#include "services/common/auth/rpc_roles.h"
#include "services/common/auth/system_keys.h"
#include "services/common/db_metrics.h"
#include "services/gateway/gateway_server.h"
#include "transport/endpoints.h"
#include "transport/grpc_limits.h"
#include "transport/periodic_runner.h"
#include "transport/service_host.h"
#include "transport/tls/grpc_credentials.h"

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

// Everything a server's command line says, part by part.
struct ServerFlags {
  HostOptions host;
  store::PostgresOptions db;
  CallerLimitsFlags limits;
  SchedulerFlags scheduler;
  GatewayFlags rest;
  PeerEndpoints peers;
  double node_event_retention_days = 0;
  HealthFlags health;
  RunsFlags runs;
  LogsFlags logs;
  double system_key_lifetime_minutes = 60;
  DirectCommands direct;
};

bool AllInOne(const Parts& parts) {
  return parts.runs && parts.scheduler && parts.cordon && parts.logs && parts.health;
}

void AddDatabaseFlags(CLI::App& app, store::PostgresOptions& db) {
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
}

// The flags of the parts this binary hosts, and of what every server has.
void AddServerFlags(CLI::App& app, const Parts& parts, ServerFlags& f) {
  if (!AllInOne(parts)) f.rest.http_listen.clear();  // the gateway lives in tessera-server only
  AddHostFlags(app, f.host);
  AddDatabaseFlags(app, f.db);
  AddCallerLimitsFlags(app, f.limits);
  if (parts.scheduler) AddSchedulerFlags(app, f.scheduler);
  if (AllInOne(parts)) AddGatewayFlags(app, f.rest);
  AddPeerEndpointFlags(app, parts, f.peers);
  if (parts.cordon) {
    app.add_option("--node-event-retention-days", f.node_event_retention_days,
                   "remove node events (cordons, losses, faults) this many days after they "
                   "happened (0: keep them)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 36500.0));
  }
  if (parts.health) AddHealthFlags(app, f.health);
  if (parts.runs) AddRunsFlags(app, f.runs);
  if (parts.logs) AddLogsFlags(app, f.logs);
  app.add_option("--system-key-lifetime-minutes", f.system_key_lifetime_minutes,
                 "this process's own key for calls to the other services expires after this "
                 "long, and is replaced every third of it")
      ->capture_default_str()
      ->check(CLI::Range(3.0, 7.0 * 24 * 60));
  AddDirectCommands(app, f.direct);
}

// What CLI11 cannot check, one flag against another; also sets the log level.
absl::Status CheckServerFlags(ServerFlags& f) {
  TESSERA_RETURN_IF_ERROR(ConfigureLogging(f.host.log_level));
  TESSERA_RETURN_IF_ERROR(CheckPeerEndpoints(f.peers));
  if (f.db.url.empty()) {
    return absl::InvalidArgumentError("--database-url is required (or TESSERA_DATABASE_URL)");
  }
  if (f.direct.parsed()) return absl::OkStatus();  // a command, not a server: no listener
  std::vector<tls::NamedAddress> addresses = {{"--grpc-listen", f.host.grpc_listen},
                                              {"--metrics-listen", f.host.metrics_listen},
                                              {"--http-listen", f.rest.http_listen}};
  for (auto& peer : f.peers.Named()) addresses.push_back(std::move(peer));
  return tls::CheckTlsFlags(f.host.tls, addresses);
}

// The parts' options, read and loaded (keys, certificates) before anything is created.
struct PartOptions {
  RunsOptions runs;
  LogsOptions logs;
  HealthOptions health;
  SchedulerOptions scheduler;
};

absl::StatusOr<PartOptions> FinishPartFlags(const Parts& parts, ServerFlags& f) {
  PartOptions o;
  TESSERA_ASSIGN_OR_RETURN(o.runs, FinishRunsFlags(f.runs, f.host.tls.ca_file));
  TESSERA_ASSIGN_OR_RETURN(o.logs, FinishLogsFlags(f.logs, f.db));
  if (parts.health) {
    TESSERA_ASSIGN_OR_RETURN(o.health, FinishHealthFlags(std::move(f.health)));
  }
  if (parts.scheduler) {
    TESSERA_ASSIGN_OR_RETURN(o.scheduler, FinishSchedulerFlags(f.scheduler));
  }
  return o;
}

// The parts this process hosts. They reach one another through `self`, the server's in-process
// channel (set once it serves), and the parts of other processes through their endpoints.
std::vector<std::unique_ptr<Component>> MakeComponents(const Parts& parts, Foundation& f,
                                                       const ServerFlags& flags, PartOptions o,
                                                       const std::shared_ptr<ChannelRef>& self,
                                                       const SystemCredential& system_key) {
  const auto& peers = flags.peers;
  const auto& tls = flags.host.tls;
  auto here_or = [&](bool hosted, const std::string& endpoint) {
    return hosted ? self : RemoteChannel(endpoint, tls);
  };
  auto scheduler = [&] { return parts.scheduler ? self : LeaderChannel(peers.scheduler, tls); };
  std::vector<std::unique_ptr<Component>> components;
  if (parts.runs) {
    std::shared_ptr<ChannelRef> logs = parts.logs ? self : nullptr;
    if (!parts.logs && !peers.logs.empty()) logs = RemoteChannel(peers.logs, tls);
    o.runs.instance_id = InstanceId();
    components.push_back(MakeRunsComponent(f, scheduler(), logs, system_key, o.runs));
  }
  if (parts.scheduler) {
    SchedulerOptions sched = o.scheduler;
    sched.database_url = flags.db.url;
    sched.instance_id = InstanceId();
    std::shared_ptr<ChannelRef> health = parts.health ? self : nullptr;
    if (!parts.health && !peers.health.empty()) health = RemoteChannel(peers.health, tls);
    components.push_back(
        MakeSchedulerComponent(f, here_or(parts.runs, peers.runs), health, system_key, sched));
  }
  if (parts.cordon) {
    components.push_back(MakeCordonComponent(
        f,
        CordonOptions{.event_retention = absl::Seconds(flags.node_event_retention_days * 86400)}));
  }
  if (parts.health) {
    o.health.instance_id = InstanceId();
    components.push_back(MakeHealthComponent(f, scheduler(), here_or(parts.cordon, peers.cordon),
                                             here_or(parts.runs, peers.runs), system_key,
                                             o.health));
  }
  if (parts.logs) {
    components.push_back(MakeLogsComponent(f, here_or(parts.runs, peers.runs), system_key, o.logs));
  }
  return components;
}

// Serves the components (and, all in one, the REST gateway) until SIGINT or SIGTERM.
int Serve(const ServerFlags& flags, std::vector<std::unique_ptr<Component>> components,
          ChannelRef& self) {
  std::vector<grpc::Service*> services;
  for (auto& c : components) {
    for (auto* s : c->services()) services.push_back(s);
  }
  grpc::EnableDefaultHealthCheckService(true);
  auto served = ServiceHost::Start(flags.host, services);
  if (!served.ok()) return Fail(served.status());
  self.Set((*served)->InProcessChannel());
  // The REST gateway reaches the services through the same in-process channel.
  auto rest = StartGateway(flags.rest, **served);
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

}  // namespace

int ServeMain(const Parts& parts, int argc, char** argv) {
  BlockTerminationSignals();
  TurnOffLockOrderChecks();
  CLI::App app{parts.description, parts.binary};
  ServerFlags flags;
  AddServerFlags(app, parts, flags);
  CLI11_PARSE(app, argc, argv);
  if (auto st = CheckServerFlags(flags); !st.ok()) return Fail(st);

  flags.db.observer = metrics::MakeDbMetrics(metrics::Registry::Default());
  auto stores = store::OpenPostgresStores(flags.db);
  if (!stores.ok()) {
    return Fail(absl::Status(stores.status().code(), absl::StrCat("cannot open the database: ",
                                                                  stores.status().message())));
  }
  auto clock = SystemClock::Shared();
  if (flags.direct.parsed()) return RunDirectCommand(flags.direct, *stores, *clock);
  auto options = FinishPartFlags(parts, flags);
  if (!options.ok()) return Fail(options.status());

  Foundation f = MakeFoundation(*stores, clock);
  ApplyCallerLimits(flags.limits, f);
  auto keys = auth::SystemKeys::Create(f.stores.api_keys, clock, parts.binary,
                                       absl::Minutes(flags.system_key_lifetime_minutes));
  if (!keys.ok()) return Fail(keys.status());
  PeriodicRunner rotation(clock, absl::Seconds(10), [&keys] { (*keys)->Tick(); });

  auto self = std::make_shared<ChannelRef>();
  auto components =
      MakeComponents(parts, f, flags, *std::move(options), self, (*keys)->credential());
  return Serve(flags, std::move(components), *self);
}

}  // namespace tessera::server
