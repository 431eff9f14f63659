#include "server/gateway_flags.h"

#include <chrono>

namespace tessera::server {

void AddGatewayFlags(CLI::App& app, GatewayFlags& f) {
  app.add_option("--console-dir", f.console_dir, gateway::ConsoleAssets::kFlagHelp)
      ->capture_default_str();
  app.add_option("--http-listen", f.http_listen,
                 "host:port for the REST gateway (port 0: any; empty: no gateway)")
      ->capture_default_str();
  app.add_option("--http-request-timeout-seconds", f.request_timeout_seconds,
                 "a REST client has this long for the TLS handshake, each request's header "
                 "and body, and to take the response (slow clients are cut off)")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 3600.0));
}

absl::StatusOr<std::unique_ptr<gateway::GatewayServer>> StartGateway(const GatewayFlags& f,
                                                                     ServiceHost& served) {
  if (f.http_listen.empty()) return nullptr;
  auto addr = ParseListenAddress("--http-listen", f.http_listen);
  if (!addr.ok()) return addr.status();
  gateway::GatewayOptions options;
  options.console_dir = gateway::ConsoleAssets::ResolveFlag(f.console_dir);
  options.limits.request_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(f.request_timeout_seconds * 1000));
  auto rest = std::make_unique<gateway::GatewayServer>(served.InProcessChannel(), options);
  if (served.https() != nullptr) rest->ServeTls(served.https());
  if (auto st = rest->Start(addr->first, static_cast<uint16_t>(addr->second)); !st.ok()) return st;
  return rest;
}

}  // namespace tessera::server
