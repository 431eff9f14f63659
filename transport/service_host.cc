#include "transport/service_host.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/service_type.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "transport/async_server.h"
#include "transport/grpc_limits.h"
#include "transport/metrics/grpc_interceptor.h"
#include "transport/tls/grpc_credentials.h"
#include "transport/tls/server_ssl_context.h"

namespace tessera {

void AddHostFlags(CLI::App& app, HostOptions& options) {
  app.add_option("--grpc-listen", options.grpc_listen, "host:port for the gRPC API (port 0: any)")
      ->capture_default_str();
  app.add_option("--metrics-listen", options.metrics_listen,
                 "host:port for /metrics and /healthz (port 0: any)")
      ->capture_default_str();
  app.add_option("--log-level", options.log_level, "trace|debug|info|warn|error")
      ->capture_default_str();
  metrics::AddScrapeFlags(app, options.scrape);
  tls::AddTlsFlags(app, options.tls);
}

void TurnOffLockOrderChecks() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

absl::Status ConfigureLogging(const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat("--log-level: unknown level \"", level,
                                                   "\" (trace, debug, info, warn, error, off)"));
  }
  spdlog::set_level(parsed);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, int>> ParseListenAddress(const std::string& flag,
                                                               const std::string& value) {
  const auto colon = value.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(value.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": expected host:port with a port from 0 to 65535, got \"", value, "\""));
  }
  std::string host = value.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host, port);
}

absl::StatusOr<std::unique_ptr<ServiceHost>> ServiceHost::Start(
    const HostOptions& options, const std::vector<grpc::Service*>& services,
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors) {
  auto grpc_addr = ParseListenAddress("--grpc-listen", options.grpc_listen);
  if (!grpc_addr.ok()) return grpc_addr.status();
  auto metrics_addr = ParseListenAddress("--metrics-listen", options.metrics_listen);
  if (!metrics_addr.ok()) return metrics_addr.status();

  if (auto st = tls::CheckTlsFlags(options.tls, {{"--grpc-listen", options.grpc_listen},
                                                 {"--metrics-listen", options.metrics_listen}});
      !st.ok()) {
    return st;
  }
  auto https = tls::ServerSslContext::ForListener(options.tls);
  if (!https.ok()) return https.status();
  auto scrape = metrics::ScrapeAccess::Load(options.scrape);
  if (!scrape.ok()) return scrape.status();

  std::unique_ptr<ServiceHost> host(new ServiceHost());
  host->https_ = *https;
  auto endpoint = metrics::MetricsEndpoint::Start(
      metrics_addr->first, static_cast<uint16_t>(metrics_addr->second), *std::move(scrape),
      metrics::Registry::Default(), host->https_);
  if (!endpoint.ok()) return endpoint.status();
  host->endpoint_ = *std::move(endpoint);

  auto metrics_factory = metrics::MakeMetricsInterceptorFactory();
  if (!metrics_factory.ok()) return metrics_factory.status();
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> all;
  all.push_back(*std::move(metrics_factory));
  for (auto& i : interceptors) all.push_back(std::move(i));

  // The standard gRPC health service (grpc.health.v1.Health: load balancers' and orchestrators'
  // probes; SERVING until shutdown) and server reflection (grpc.reflection.v1alpha: grpcurl and
  // Postman list and call the API without its .proto files). Neither carries a key: what they
  // say is that the process serves, and the API's own shape.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ApplyTransportSettings(builder);
  builder.AddListeningPort(options.grpc_listen, tls::ServerCredentials(options.tls),
                           &host->grpc_port_);
  // Services on the async API bring completion queues of their own (async_server.h).
  for (grpc::Service* s : services) {
    builder.RegisterService(s);
    if (auto* a = dynamic_cast<AsyncServing*>(s)) {
      a->AddCompletionQueues(builder);
      host->async_.push_back(a);
    }
  }
  builder.experimental().SetInterceptorCreators(std::move(all));
  host->server_ = builder.BuildAndStart();
  if (!host->server_ || host->grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("--grpc-listen: cannot listen on ",
                                               options.grpc_listen,
                                               " (address in use or not local?)"));
  }
  for (auto* a : host->async_) a->Started();
  spdlog::info("serving gRPC{} on {}:{}, metrics on {}://{}:{}/metrics",
               options.tls.enabled() ? " over TLS" : " in plain text", grpc_addr->first,
               host->grpc_port_, options.tls.enabled() ? "https" : "http", metrics_addr->first,
               host->metrics_port());
  return host;
}

ServiceHost::~ServiceHost() { Shutdown(); }

int ServiceHost::metrics_port() const { return endpoint_ ? endpoint_->port() : 0; }

std::shared_ptr<grpc::Channel> ServiceHost::InProcessChannel() {
  grpc::ChannelArguments args;
  ApplyTransportSettings(args);
  return server_->InProcessChannel(args);
}

void ServiceHost::Shutdown() {
  if (server_) {
    // Probes hear NOT_SERVING while the calls in flight finish.
    if (auto* health = server_->GetHealthCheckService()) health->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    // Their queues go before the server: its own requests on them refer to it.
    for (auto* a : async_) a->Stop();
    server_->Wait();
    server_.reset();
  }
  endpoint_.reset();
}

namespace {
sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  const sigset_t set = TerminationSignals();
  int sig = 0;
  sigwait(&set, &sig);
  return sig;
}

void ServiceHost::RunUntilSignal() {
  const int sig = WaitForTerminationSignal();
  spdlog::info("received signal {}, shutting down", sig);
  Shutdown();
}

}  // namespace tessera
