// tessera-gateway: the REST/JSON gateway in front of the gRPC API, for CI pipelines and scripts.
// Its flags are services/gateway/gateway_flags.h's; this only composes.
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "services/gateway/gateway_flags.h"
#include "services/gateway/gateway_server.h"
#include "transport/grpc_limits.h"
#include "transport/metrics/http_endpoint.h"
#include "transport/service_host.h"
#include "transport/tls/grpc_credentials.h"

int main(int argc, char** argv) {
  tessera::BlockTerminationSignals();
  tessera::TurnOffLockOrderChecks();
  CLI::App app{"tessera-gateway: JSON over HTTP for the Tessera API"};
  tessera::gateway::GatewayFlags flags;
  tessera::gateway::AddGatewayFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  auto setup = tessera::gateway::FinishGatewayFlags(flags);
  if (!setup.ok()) {
    spdlog::error("{}", std::string(setup.status().message()));
    return 2;
  }
  // Every binary serves /metrics, the gateway too.
  auto metrics = tessera::metrics::MetricsEndpoint::Start(
      setup->metrics_host, setup->metrics_port, std::move(setup->scrape),
      tessera::metrics::Registry::Default(), setup->https);
  if (!metrics.ok()) {
    spdlog::error("{}", metrics.status().ToString());
    return 1;
  }
  const auto credentials = tessera::tls::ChannelCredentials(flags.tls);
  tessera::gateway::GatewayOptions options = setup->options;
  if (setup->logs_target) {
    options.logs_channel = tessera::CreateLimitedChannel(*setup->logs_target, credentials);
  }
  tessera::gateway::GatewayServer gateway(
      tessera::CreateLimitedChannel(setup->upstream_target, credentials), options);
  if (setup->https != nullptr) gateway.ServeTls(setup->https);
  if (auto st = gateway.Start(setup->listen_host, setup->listen_port); !st.ok()) {
    spdlog::error("{}", st.ToString());
    return 1;
  }
  spdlog::info("gateway: serving {} on port {}, forwarding to gRPC at {} (logs: {})",
               setup->https ? "HTTPS" : "plain HTTP", gateway.port(), flags.upstream,
               flags.logs_endpoint.empty() ? flags.upstream : flags.logs_endpoint);
  const int sig = tessera::WaitForTerminationSignal();
  spdlog::info("received signal {}, shutting down", sig);
  gateway.Shutdown();
  return 0;
}
