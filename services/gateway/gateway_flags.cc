#include "services/gateway/gateway_flags.h"

#include <CLI/CLI.hpp>

#include "services/gateway/console_assets.h"
#include "transport/endpoints.h"
#include "transport/service_host.h"

namespace tessera::gateway {
namespace {

// The gRPC target for a flag's endpoint list, each endpoint checked as host:port.
absl::StatusOr<std::string> EndpointTarget(const std::string& flag, const std::string& list) {
  for (const auto& e : SplitEndpoints(list)) {
    if (auto parsed = ParseListenAddress(flag, e); !parsed.ok()) return parsed.status();
  }
  return GrpcTarget(flag, list);
}

}  // namespace

void AddGatewayFlags(CLI::App& app, GatewayFlags& f) {
  app.add_option("--listen", f.listen, "host:port to serve HTTP on (port 0: any)")
      ->capture_default_str();
  app.add_option("--upstream", f.upstream, "host:port of the gRPC API (several replicas: a:1,b:2)")
      ->capture_default_str();
  app.add_option("--logs-endpoint", f.logs_endpoint,
                 "host:port of the log service, or several (default: the --upstream endpoint)");
  app.add_option("--console-dir", f.console_dir, ConsoleAssets::kFlagHelp)->capture_default_str();
  app.add_option("--metrics-listen", f.metrics_listen, "host:port for /metrics and /healthz")
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--upstream-timeout", f.upstream_timeout_seconds,
                 "deadline of each gRPC call, seconds")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--max-connections", f.max_connections, "connections served at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--max-connections-per-address", f.max_connections_per_address,
                 "connections served at once from one client address (more get 429)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--handler-threads", f.handler_threads,
                 "threads running requests' gRPC calls (event streams and idle clients take none)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--request-timeout-seconds", f.request_timeout_seconds,
                 "a client has this long for the TLS handshake, each request's header and body, "
                 "and to take the response (slow clients are cut off)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  metrics::AddScrapeFlags(app, f.scrape);
  tls::AddTlsFlags(app, f.tls);
}

absl::StatusOr<GatewaySetup> FinishGatewayFlags(const GatewayFlags& f) {
  if (auto st = ConfigureLogging(f.log_level); !st.ok()) return st;
  GatewaySetup setup;
  auto address = ParseListenAddress("--listen", f.listen);
  if (!address.ok()) return address.status();
  setup.listen_host = address->first;
  setup.listen_port = static_cast<std::uint16_t>(address->second);
  auto upstream = EndpointTarget("--upstream", f.upstream);
  if (!upstream.ok()) return upstream.status();
  setup.upstream_target = *std::move(upstream);
  const std::string logs_endpoint = f.logs_endpoint.empty() ? f.upstream : f.logs_endpoint;
  auto logs = EndpointTarget("--logs-endpoint", logs_endpoint);
  if (!logs.ok()) return logs.status();
  if (logs_endpoint != f.upstream) setup.logs_target = *std::move(logs);
  auto metrics_address = ParseListenAddress("--metrics-listen", f.metrics_listen);
  if (!metrics_address.ok()) return metrics_address.status();
  setup.metrics_host = metrics_address->first;
  setup.metrics_port = static_cast<std::uint16_t>(metrics_address->second);
  if (auto st = tls::CheckTlsFlags(f.tls, {{"--listen", f.listen},
                                           {"--metrics-listen", f.metrics_listen},
                                           {"--upstream", f.upstream},
                                           {"--logs-endpoint", logs_endpoint}});
      !st.ok()) {
    return st;
  }
  auto https = tls::ServerSslContext::ForListener(f.tls);
  if (!https.ok()) return https.status();
  setup.https = *std::move(https);
  auto scrape = metrics::ScrapeAccess::Load(f.scrape);
  if (!scrape.ok()) return scrape.status();
  setup.scrape = *std::move(scrape);

  setup.options.upstream_timeout = std::chrono::seconds(f.upstream_timeout_seconds);
  setup.options.max_connections = f.max_connections;
  setup.options.max_connections_per_address = f.max_connections_per_address;
  setup.options.handler_threads = f.handler_threads;
  setup.options.console_dir = ConsoleAssets::ResolveFlag(f.console_dir);
  setup.options.limits.request_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(f.request_timeout_seconds * 1000));
  return setup;
}

}  // namespace tessera::gateway
