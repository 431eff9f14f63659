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
#include "services/server/components.h"
#include "services/server/health_flags.h"
#include "services/server/runs_flags.h"

namespace tessera::server {
namespace {

int Fail(const absl::Status& st) {
  std::cerr << "Error: " << st.message() << "\n";
  return absl::IsInvalidArgument(st) ? 2 : 1;
}

absl::StatusOr<v1::Role> ParseRole(const std::string& role) {
  for (v1::Role r :
       {v1::ROLE_USER, v1::ROLE_OPERATOR, v1::ROLE_ADMIN, v1::ROLE_NODE, v1::ROLE_SYSTEM}) {
    if (role == auth::RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--role: unknown role \"", role, "\" (user, operator, admin, node or system)"));
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
  SchedulerOptions sched;
  std::string runs_endpoint, scheduler_endpoint, logs_endpoint, cordon_endpoint, health_endpoint;
  const bool all_in_one =
      parts.runs && parts.scheduler && parts.cordon && parts.logs && parts.health;
  HealthFlags health_flags;
  std::string http_listen = all_in_one ? "127.0.0.1:8080" : "";
  double lease_seconds = 2.8, heartbeat_seconds = 1, stop_grace_seconds = 10,
         max_clock_skew_seconds = 10;
  std::string fair_share_half_life = "168h";
  bool require_node_terms = false;
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
  std::string logs_database_url;
  if (parts.logs) {
    app.add_option("--logs-database-url", logs_database_url,
                   "a PostgreSQL of their own for rank output (lines, quotas, followers' "
                   "notifications); keys, runs and the rest stay in --database-url (default: "
                   "that one)")
        ->envname("TESSERA_LOGS_DATABASE_URL");
  }
  int max_streams_per_user = 256;
  app.add_option("--max-streams-per-user", max_streams_per_user,
                 "streams one person may hold open at once in each service (log follows, run and "
                 "node-event watches, shells; the REST gateway's count as their caller's); past "
                 "it a stream is refused, naming this limit (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1'000'000));
  double max_calls_per_user_per_second = auth::Authenticator::kDefaultCallsPerUserPerSecond;
  app.add_option("--max-calls-per-user-per-second", max_calls_per_user_per_second,
                 "calls one user may make a second in each service, ten seconds' worth at "
                 "once; past it a call is refused (RESOURCE_EXHAUSTED, naming this flag and when "
                 "to call again) before anything is read; operators and admins are not held to "
                 "it (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  int max_stream_lifetime_seconds = 1800;
  app.add_option("--max-stream-lifetime-seconds", max_stream_lifetime_seconds,
                 "how long a person's log follow or watch stays open: then it ends with "
                 "UNAVAILABLE and the client opens it again (mcli does, a follow resuming "
                 "where it was), so no stream holds a slot or a thread for ever (0: no limit; "
                 "shells are not ended)")
      ->capture_default_str()
      ->check(CLI::Range(0, 7 * 24 * 3600));
  double max_unknown_keys_per_address = auth::Authenticator::kDefaultUnknownKeysPerSecond;
  app.add_option("--max-unknown-keys-per-address", max_unknown_keys_per_address,
                 "API keys the services do not know that one address may try a second (ten "
                 "times as many at once); past it, its keys not already known are refused "
                 "without a database lookup until the budget refills (0: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  double service_call_timeout_seconds = 0;
  app.add_option("--service-call-timeout-seconds", service_call_timeout_seconds,
                 "how long a call to another Tessera service waits before it fails (0: each "
                 "client's default, 10 to 30 s)")
      ->check(CLI::Range(0.0, 3600.0));
  if (parts.scheduler) {
    app.add_option("--lease-seconds", lease_seconds,
                   "a node that has not heartbeat for this long is lost")
        ->capture_default_str()
        ->check(CLI::Range(0.2, 3600.0));
    app.add_option("--heartbeat-seconds", heartbeat_seconds, "how often workers heartbeat")
        ->capture_default_str()
        ->check(CLI::Range(0.05, 600.0));
    app.add_option("--stop-grace-seconds", stop_grace_seconds, "SIGTERM to SIGKILL for ranks")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 3600.0));
    app.add_option("--max-clock-skew-seconds", max_clock_skew_seconds,
                   "a node whose wall clock is further than this from the control plane's fails "
                   "its pre-flight checks before a run starts there (0: not checked)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 86400.0));
    app.add_flag("--require-node-terms", require_node_terms,
                 "refuse a node whose join token or node key does not fix its cluster and GPU "
                 "type (their terms): no node's own word decides the pool it is in");
    app.add_option("--fair-share-half-life", fair_share_half_life,
                   "fair share: GPU time used this long ago counts half (e.g. 24h, 168h)")
        ->capture_default_str()
        ->check([](const std::string& text) -> std::string {
          absl::Duration d;
          if (!absl::ParseDuration(text, &d) || d < absl::Minutes(1) || d > absl::Hours(24 * 365)) {
            return "expected a duration from 1m to 8760h, such as 24h or 168h";
          }
          return "";
        });
  }
  double http_request_timeout_seconds = 60;
  std::string console_dir = "auto";
  if (all_in_one) {
    app.add_option("--console-dir", console_dir, gateway::ConsoleAssets::kFlagHelp)
        ->capture_default_str();
    app.add_option("--http-listen", http_listen,
                   "host:port for the REST gateway (port 0: any; empty: no gateway)")
        ->capture_default_str();
    app.add_option("--http-request-timeout-seconds", http_request_timeout_seconds,
                   "a REST client has this long for the TLS handshake, each request's header "
                   "and body, and to take the response (slow clients are cut off)")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
  }
  if (parts.runs && !parts.scheduler) {
    app.add_option("--scheduler-endpoint", scheduler_endpoint, "host:port of tessera-scheduler")
        ->required();
  }
  if ((parts.scheduler || parts.logs) && !parts.runs) {
    app.add_option("--runs-endpoint", runs_endpoint, "host:port of tessera-runs")->required();
  }
  double node_event_retention_days = 0;
  if (parts.cordon) {
    app.add_option("--node-event-retention-days", node_event_retention_days,
                   "remove node events (cordons, losses, faults) this many days after they "
                   "happened (0: keep them)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 36500.0));
  }
  if (parts.health) AddHealthFlags(app, health_flags);
  if (parts.health && !parts.scheduler) {
    app.add_option("--scheduler-endpoint", scheduler_endpoint, "host:port of tessera-scheduler")
        ->required();
  }
  if (parts.health && !parts.cordon) {
    app.add_option("--cordon-endpoint", cordon_endpoint, "host:port of tessera-cordon")->required();
  }
  if (parts.health && !parts.runs) {
    app.add_option("--runs-endpoint", runs_endpoint, "host:port of tessera-runs")->required();
  }
  if (parts.scheduler && !parts.health) {
    app.add_option("--health-endpoint", health_endpoint,
                   "host:port of tessera-health, for GPU faults, hangs and canary results "
                   "(empty: none; hung and faulty runs are still evicted)");
  }
  if (parts.runs && !parts.logs) {
    app.add_option("--logs-endpoint", logs_endpoint,
                   "host:port of tessera-logs, to delete the logs of deleted runs (empty: none)");
  }

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
  std::string log_rate = "16MiB", log_quota = "10GiB";
  double log_retention_days = 0;
  if (parts.logs) {
    app.add_option("--log-rate-per-run", log_rate,
                   "bytes of log text per second a run may print, over all its ranks, with "
                   "bursts of 10 s (0: no limit); lines over it are dropped with a marker line")
        ->capture_default_str();
    app.add_option("--log-quota-per-run", log_quota,
                   "bytes of log text kept per run, every attempt (0: no limit)")
        ->capture_default_str();
    app.add_option("--log-retention-days", log_retention_days,
                   "remove a finished run's logs this many days after its last line (0: keep "
                   "them until the run is deleted)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 36500.0));
  }
  app.add_option("--system-key-lifetime-minutes", system_key_lifetime_minutes,
                 "this process's own key for calls to the other services expires after this "
                 "long, and is replaced every third of it")
      ->capture_default_str()
      ->check(CLI::Range(3.0, 7.0 * 24 * 60));

  std::string key_user, key_role = "user", key_description, key_node;
  int64_t key_expires_in = 0;
  CLI::App* create_key = app.add_subcommand(
      "create-api-key", "create an API key directly in the database and print its secret");
  create_key->add_option("--user", key_user, "the key's user")->required();
  create_key->add_option("--role", key_role, "user, operator, admin, node or system")
      ->capture_default_str();
  create_key->add_option("--node", key_node, "the node a node key acts as (--role node)");
  create_key->add_option("--expires-in-seconds", key_expires_in,
                         "the key stops working this long after it is made (0: never)");
  create_key->add_option("--description", key_description, "what the key is for");
  // What the node may say of itself (v1::NodeTerms), on a node key or a join token.
  v1::NodeTerms key_terms, token_terms;
  const auto add_terms_flags = [](CLI::App* command, v1::NodeTerms& terms) {
    command->add_option_function<std::string>(
        "--cluster", [&terms](const std::string& v) { terms.set_cluster(v); },
        "the cluster the node must register in (default: the node's own word)");
    command->add_option_function<std::string>(
        "--gpu-type", [&terms](const std::string& v) { terms.set_gpu_type(v); },
        "the GPU type the node must report");
    command->add_option_function<int>(
        "--max-gpus", [&terms](int v) { terms.set_max_gpus(v); },
        "the most GPUs the node may report");
  };
  add_terms_flags(create_key, key_terms);
  std::string token_node, token_description;
  int64_t token_expires_in = 3600;
  CLI::App* create_token = app.add_subcommand(
      "create-join-token",
      "create a join token for a new node directly in the database and print its secret");
  create_token->add_option("--node", token_node, "the node that may join with it")->required();
  create_token->add_option("--expires-in-seconds", token_expires_in, "how long it may be used")
      ->capture_default_str();
  create_token->add_option("--description", token_description, "what the token is for");
  add_terms_flags(create_token, token_terms);
  CLI11_PARSE(app, argc, argv);

  if (auto st = ConfigureLogging(host.log_level); !st.ok()) return Fail(st);
  for (const auto& [flag, value] :
       {std::pair<const char*, const std::string&>{"--runs-endpoint", runs_endpoint},
        {"--scheduler-endpoint", scheduler_endpoint},
        {"--logs-endpoint", logs_endpoint},
        {"--cordon-endpoint", cordon_endpoint},
        {"--health-endpoint", health_endpoint}}) {
    if (value.empty()) continue;
    if (auto target = GrpcTarget(flag, value); !target.ok()) return Fail(target.status());
  }
  if (db.url.empty()) {
    return Fail(absl::InvalidArgumentError("--database-url is required (or TESSERA_DATABASE_URL)"));
  }
  const bool direct = create_key->parsed() || create_token->parsed();
  if (!direct) {
    if (auto st = tls::CheckTlsFlags(host.tls, {{"--grpc-listen", host.grpc_listen},
                                                {"--metrics-listen", host.metrics_listen},
                                                {"--http-listen", http_listen},
                                                {"--runs-endpoint", runs_endpoint},
                                                {"--scheduler-endpoint", scheduler_endpoint},
                                                {"--logs-endpoint", logs_endpoint},
                                                {"--cordon-endpoint", cordon_endpoint},
                                                {"--health-endpoint", health_endpoint}});
        !st.ok()) {
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

  if (create_key->parsed()) {
    auto role = ParseRole(key_role);
    if (!role.ok()) return Fail(role.status());
    v1::CreateApiKeyRequest request;
    request.set_user(key_user);
    request.set_role(*role);
    request.set_node(key_node);
    request.set_description(key_description);
    request.set_expires_in_seconds(key_expires_in);
    if (key_terms.ByteSizeLong() > 0) *request.mutable_node_terms() = key_terms;
    auto secret = admin::CreateApiKeyDirect(*stores->api_keys, *clock, request);
    if (!secret.ok()) return Fail(secret.status());
    std::cout << *secret << "\n";
    return 0;
  }
  if (create_token->parsed()) {
    v1::CreateJoinTokenRequest request;
    request.set_node(token_node);
    request.set_expires_in_seconds(token_expires_in);
    request.set_description(token_description);
    *request.mutable_terms() = token_terms;
    auto secret =
        admin::CreateJoinTokenDirect(*stores->join_tokens, *clock, request, "tessera-server");
    if (!secret.ok()) return Fail(secret.status());
    std::cout << *secret << "\n";
    return 0;
  }

  RunsOptions runs_options = FinishRunsFlags(runs_flags);
  LogsOptions logs_options;
  if (!logs_database_url.empty() && !direct) {
    store::PostgresOptions logs_db = db;
    logs_db.url = logs_database_url;
    auto log_stores = store::OpenPostgresStores(logs_db);
    if (!log_stores.ok()) {
      return Fail(absl::Status(
          log_stores.status().code(),
          absl::StrCat("cannot open the logs database: ", log_stores.status().message())));
    }
    logs_options.store = log_stores->logs;
    logs_options.changes = log_stores->changes;
  }
  logs_options.retention = absl::Seconds(log_retention_days * 86400);
  logs_options.retention_check = RetentionCheckInterval(logs_options.retention);
  for (const auto& [flag, text, into] :
       {std::tuple<const char*, const std::string&, int64_t*>{"--log-rate-per-run", log_rate,
                                                              &logs_options.quota.bytes_per_second},
        {"--log-quota-per-run", log_quota, &logs_options.quota.max_bytes}}) {
    if (text == "0") {
      *into = 0;
      continue;
    }
    auto size = ParseByteSize(text);
    if (!size.ok()) {
      return Fail(absl::InvalidArgumentError(absl::StrCat(flag, ": ", size.status().message())));
    }
    *into = *size;
  }
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
  f.service_call_timeout = absl::Seconds(service_call_timeout_seconds);
  f.authenticator->set_max_streams_per_user(max_streams_per_user);
  f.authenticator->set_max_stream_lifetime(absl::Seconds(max_stream_lifetime_seconds));
  f.authenticator->set_max_calls_per_user_per_second(max_calls_per_user_per_second);
  f.authenticator->set_max_unknown_keys_per_address(max_unknown_keys_per_address);
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
    if (!parts.logs && !logs_endpoint.empty()) logs = RemoteChannel(logs_endpoint, host.tls);
    runs_options.instance_id = InstanceId();
    components.push_back(
        MakeRunsComponent(f, parts.scheduler ? self : LeaderChannel(scheduler_endpoint, host.tls),
                          logs, system_key, runs_options));
  }
  if (parts.scheduler) {
    sched.lease = absl::Seconds(lease_seconds);
    sched.heartbeat_interval = absl::Seconds(heartbeat_seconds);
    sched.stop_grace = absl::Seconds(stop_grace_seconds);
    sched.max_clock_skew = absl::Seconds(max_clock_skew_seconds);
    sched.require_node_terms = require_node_terms;
    (void)absl::ParseDuration(fair_share_half_life, &sched.fair_share_half_life);  // checked
    sched.database_url = db.url;
    sched.instance_id = InstanceId();
    std::shared_ptr<ChannelRef> health_channel = parts.health ? self : nullptr;
    if (!parts.health && !health_endpoint.empty())
      health_channel = RemoteChannel(health_endpoint, host.tls);
    components.push_back(
        MakeSchedulerComponent(f, parts.runs ? self : RemoteChannel(runs_endpoint, host.tls),
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
        f, parts.scheduler ? self : LeaderChannel(scheduler_endpoint, host.tls),
        parts.cordon ? self : RemoteChannel(cordon_endpoint, host.tls),
        parts.runs ? self : RemoteChannel(runs_endpoint, host.tls), system_key, *health));
  }
  if (parts.logs) {
    components.push_back(MakeLogsComponent(
        f, parts.runs ? self : RemoteChannel(runs_endpoint, host.tls), system_key, logs_options));
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
  std::unique_ptr<gateway::GatewayServer> rest;
  if (!http_listen.empty()) {
    auto addr = ParseListenAddress("--http-listen", http_listen);
    if (!addr.ok()) return Fail(addr.status());
    gateway::GatewayOptions rest_options;
    rest_options.console_dir = gateway::ConsoleAssets::ResolveFlag(console_dir);
    rest_options.limits.request_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(http_request_timeout_seconds * 1000));
    rest = std::make_unique<gateway::GatewayServer>((*served)->InProcessChannel(), rest_options);
    if ((*served)->https() != nullptr) rest->ServeTls((*served)->https());
    if (auto st = rest->Start(addr->first, static_cast<uint16_t>(addr->second)); !st.ok()) {
      return Fail(st);
    }
  }
  // Tests and scripts read this line to learn the ports.
  // One write, so that no other thread's output lands inside it.
  std::cout << absl::StrCat("listening grpc=", (*served)->grpc_port(),
                            " metrics=", (*served)->metrics_port(),
                            " http=", rest ? rest->port() : 0, "\n")
            << std::flush;
  (*served)->RunUntilSignal();
  if (rest) rest->Shutdown();
  components.clear();
  return 0;
}

}  // namespace tessera::server
