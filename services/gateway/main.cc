// tessera-gateway: the REST/JSON gateway in front of the gRPC API, for CI pipelines and scripts.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "services/common/endpoints.h"
#include "services/common/grpc_limits.h"
#include "services/common/metrics/http_endpoint.h"
#include "services/common/service_host.h"
#include "services/common/tls/grpc_credentials.h"
#include "services/common/tls/server_ssl_context.h"
#include "services/common/tls/tls_flags.h"
#include "services/gateway/gateway_server.h"

namespace {

// The gRPC target for a flag's endpoint list, each endpoint checked as host:port.
absl::StatusOr<std::string> EndpointTarget(const std::string& flag, const std::string& list) {
  for (const auto& e : tessera::SplitEndpoints(list)) {
    if (auto parsed = tessera::ParseListenAddress(flag, e); !parsed.ok()) return parsed.status();
  }
  return tessera::GrpcTarget(flag, list);
}

}  // namespace

int main(int argc, char** argv) {
  tessera::BlockTerminationSignals();
  tessera::TurnOffLockOrderChecks();
  CLI::App app{"tessera-gateway: JSON over HTTP for the Tessera API"};
  std::string listen = "127.0.0.1:8080";
  std::string upstream = "127.0.0.1:50051";
  std::string logs_endpoint;
  std::string log_level = "info";
  std::string metrics_listen = "127.0.0.1:9465";
  int upstream_timeout_s = 30;
  std::size_t max_connections = 10000;
  int handler_threads = 32;
  app.add_option("--listen", listen, "host:port to serve HTTP on (port 0: any)")
      ->capture_default_str();
  app.add_option("--upstream", upstream, "host:port of the gRPC API (several replicas: a:1,b:2)")
      ->capture_default_str();
  app.add_option("--logs-endpoint", logs_endpoint,
                 "host:port of the log service, or several (default: the --upstream endpoint)");
  std::string console_dir = "auto";
  app.add_option("--console-dir", console_dir, tessera::gateway::ConsoleAssets::kFlagHelp)
      ->capture_default_str();
  app.add_option("--metrics-listen", metrics_listen, "host:port for /metrics and /healthz")
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--upstream-timeout", upstream_timeout_s, "deadline of each gRPC call, seconds")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  app.add_option("--max-connections", max_connections, "connections served at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  std::size_t max_connections_per_address = 1000;
  app.add_option("--max-connections-per-address", max_connections_per_address,
                 "connections served at once from one client address (more get 429)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--handler-threads", handler_threads,
                 "threads running requests' gRPC calls (event streams and idle clients take none)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  double request_timeout_s = 60;
  app.add_option("--request-timeout-seconds", request_timeout_s,
                 "a client has this long for the TLS handshake, each request's header and body, "
                 "and to take the response (slow clients are cut off)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
  tessera::metrics::ScrapeFlags scrape;
  tessera::metrics::AddScrapeFlags(app, scrape);
  tessera::tls::TlsFlags tls;
  tessera::tls::AddTlsFlags(app, tls);
  CLI11_PARSE(app, argc, argv);

  if (auto st = tessera::ConfigureLogging(log_level); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 2;
  }
  auto address = tessera::ParseListenAddress("--listen", listen);
  if (!address.ok()) {
    spdlog::error("{}", address.status().ToString());
    return 2;
  }
  auto upstream_target = EndpointTarget("--upstream", upstream);
  if (!upstream_target.ok()) {
    spdlog::error("{}", upstream_target.status().ToString());
    return 2;
  }
  if (logs_endpoint.empty()) logs_endpoint = upstream;
  auto logs_target = EndpointTarget("--logs-endpoint", logs_endpoint);
  if (!logs_target.ok()) {
    spdlog::error("{}", logs_target.status().ToString());
    return 2;
  }

  auto metrics_address = tessera::ParseListenAddress("--metrics-listen", metrics_listen);
  if (!metrics_address.ok()) {
    spdlog::error("{}", metrics_address.status().ToString());
    return 2;
  }
  if (auto st = tessera::tls::CheckTlsFlags(tls, {{"--listen", listen},
                                                  {"--metrics-listen", metrics_listen},
                                                  {"--upstream", upstream},
                                                  {"--logs-endpoint", logs_endpoint}});
      !st.ok()) {
    spdlog::error("{}", std::string(st.message()));
    return 2;
  }
  auto loaded = tessera::tls::ServerSslContext::ForListener(tls);
  if (!loaded.ok()) {
    spdlog::error("{}", std::string(loaded.status().message()));
    return 2;
  }
  const std::shared_ptr<tessera::tls::ServerSslContext> https = *std::move(loaded);
  auto scrape_access = tessera::metrics::ScrapeAccess::Load(scrape);
  if (!scrape_access.ok()) {
    spdlog::error("{}", std::string(scrape_access.status().message()));
    return 2;
  }
  // Every binary serves /metrics, the gateway too.
  auto metrics = tessera::metrics::MetricsEndpoint::Start(
      metrics_address->first, static_cast<std::uint16_t>(metrics_address->second),
      *std::move(scrape_access), tessera::metrics::Registry::Default(), https);
  if (!metrics.ok()) {
    spdlog::error("{}", metrics.status().ToString());
    return 1;
  }

  tessera::gateway::GatewayOptions options;
  options.upstream_timeout = std::chrono::seconds(upstream_timeout_s);
  options.max_connections = max_connections;
  options.max_connections_per_address = max_connections_per_address;
  options.handler_threads = handler_threads;
  options.console_dir = tessera::gateway::ConsoleAssets::ResolveFlag(console_dir);
  options.limits.request_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(request_timeout_s * 1000));
  if (logs_endpoint != upstream) {
    options.logs_channel =
        tessera::CreateLimitedChannel(*logs_target, tessera::tls::ChannelCredentials(tls));
  }
  tessera::gateway::GatewayServer gateway(
      tessera::CreateLimitedChannel(*upstream_target, tessera::tls::ChannelCredentials(tls)),
      options);
  if (https != nullptr) gateway.ServeTls(https);
  if (auto st = gateway.Start(address->first, static_cast<std::uint16_t>(address->second));
      !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  spdlog::info("gateway: serving {} on port {}, forwarding to gRPC at {} (logs: {})",
               https ? "HTTPS" : "plain HTTP", gateway.port(), upstream, logs_endpoint);

  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
  spdlog::info("received signal {}, shutting down", sig);
  gateway.Shutdown();
  return 0;
}
