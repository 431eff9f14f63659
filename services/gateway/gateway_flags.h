#pragma once
// tessera-gateway's command line (the standalone gateway; tessera-server's own gateway has
// server/gateway_flags.h): its flags, registered on the app, then checked and resolved
// by FinishGatewayFlags into what main starts, so that main only composes.

#include "base/cli_app_fwd.h"
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "services/gateway/gateway_server.h"
#include "transport/metrics/scrape_access.h"
#include "transport/tls/server_ssl_context.h"
#include "transport/tls/tls_flags.h"

namespace tessera::gateway {

struct GatewayFlags {
  std::string listen = "127.0.0.1:8080";
  std::string upstream = "127.0.0.1:50051";
  std::string logs_endpoint;  // empty: --upstream
  std::string console_dir = "auto";
  std::string metrics_listen = "127.0.0.1:9465";
  std::string log_level = "info";
  int upstream_timeout_seconds = 30;
  std::size_t max_connections = 10000;
  std::size_t max_connections_per_address = 1000;
  int handler_threads = 32;
  double request_timeout_seconds = 60;
  metrics::ScrapeFlags scrape;
  tls::TlsFlags tls;
};

void AddGatewayFlags(CLI::App& app, GatewayFlags& f);

// What the flags say to start, checked.
struct GatewaySetup {
  std::string listen_host;
  std::uint16_t listen_port = 0;
  std::string upstream_target;             // the gRPC target of --upstream
  std::optional<std::string> logs_target;  // of --logs-endpoint, where it is not --upstream
  std::string metrics_host;
  std::uint16_t metrics_port = 0;
  metrics::ScrapeAccess scrape = metrics::ScrapeAccess::Closed();
  std::shared_ptr<tls::ServerSslContext> https;  // null: plain HTTP
  GatewayOptions options;                        // without its channels
};

// INVALID_ARGUMENT naming the flag at fault (an address that is not host:port, an unknown log
// level, TLS flags that do not fit the addresses, a scrape token file that cannot be used), or
// the TLS files' own error.
absl::StatusOr<GatewaySetup> FinishGatewayFlags(const GatewayFlags& f);

}  // namespace tessera::gateway
