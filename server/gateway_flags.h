#pragma once
// The REST gateway tessera-server hosts beside its services (the all-in-one binary only): its
// address, the console's files and how long a slow client is waited for; registered on the
// command line, then started over the server's in-process channel.

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "services/gateway/gateway_server.h"
#include "transport/service_host.h"

namespace tessera::server {

struct GatewayFlags {
  std::string http_listen = "127.0.0.1:8080";  // empty: no gateway
  std::string console_dir = "auto";
  double request_timeout_seconds = 60;
};

void AddGatewayFlags(CLI::App& app, GatewayFlags& f);

// The gateway, serving on --http-listen (HTTPS when `served` does TLS); null when --http-listen
// is empty. INVALID_ARGUMENT names a bad address.
absl::StatusOr<std::unique_ptr<gateway::GatewayServer>> StartGateway(const GatewayFlags& f,
                                                                     ServiceHost& served);

}  // namespace tessera::server
