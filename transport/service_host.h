#pragma once
// What every Tessera binary does the same way: common flags, a gRPC server with the metrics
// interceptor (and any others the binary adds), the /metrics HTTP endpoint, structured logs,
// and a clean shutdown on SIGINT/SIGTERM.

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/server_interceptor.h>

#include "base/cli_app_fwd.h"
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "transport/metrics/http_endpoint.h"
#include "transport/tls/tls_flags.h"

namespace tessera::tls {
class ServerSslContext;  // server_ssl_context.h: boost/asio/ssl, kept out of this header
}  // namespace tessera::tls

namespace tessera {

class AsyncServing;  // async_server.h

struct HostOptions {
  // host:port for gRPC; port 0 picks a free one.
  std::string grpc_listen = "127.0.0.1:50051";
  // host:port for /metrics and /healthz; port 0 picks a free one.
  std::string metrics_listen = "127.0.0.1:9464";
  std::string log_level = "info";
  // Both listeners serve TLS with these, unless tls.plaintext (loopback only).
  tls::TlsFlags tls{};
  // Who may read /metrics (scrape_access.h): no one unless a token file is given or it is open.
  metrics::ScrapeFlags scrape{};
};

// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts later, so that
// ServiceHost::RunUntilSignal can wait for them. Call it first in main(), before any thread exists.
void BlockTerminationSignals();

// Turns off absl's lock-order (deadlock) bookkeeping for this process. Debian's absl is built
// with it on: every Mutex lock updates a global graph, a few microseconds that made up much of
// an idle worker's wake-ups and about 1% of a busy server. Tests keep it (they call no main()),
// so a lock-order inversion is still caught there. Call it early in a service's main().
void TurnOffLockOrderChecks();

// Waits (after BlockTerminationSignals) for SIGINT or SIGTERM and returns which arrived.
int WaitForTerminationSignal();

// Adds --grpc-listen, --metrics-listen, --log-level, the scrape flags (--metrics-token-file,
// --metrics-open) and the TLS flags to a command line.
void AddHostFlags(CLI::App& app, HostOptions& options);

// Applies --log-level to spdlog; INVALID_ARGUMENT for an unknown level.
absl::Status ConfigureLogging(const std::string& level);

// Splits "host:port" (IPv4, name, or [IPv6]); INVALID_ARGUMENT naming the flag when malformed.
absl::StatusOr<std::pair<std::string, int>> ParseListenAddress(const std::string& flag,
                                                               const std::string& value);

class ServiceHost {
 public:
  // Starts serving `services` (which must outlive the host) behind the metrics interceptor and
  // then `interceptors`, in that order.
  static absl::StatusOr<std::unique_ptr<ServiceHost>> Start(
      const HostOptions& options, const std::vector<grpc::Service*>& services,
      std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
          interceptors = {});
  ~ServiceHost();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const;
  metrics::MetricsEndpoint& endpoint() { return *endpoint_; }
  // The certificate its HTTP listeners serve (null in plain text): another HTTP listener of the
  // process (tessera-server's REST gateway) serves the same.
  const std::shared_ptr<tls::ServerSslContext>& https() const { return https_; }
  grpc::Server& server() { return *server_; }
  // An in-process channel to this server (for the all-in-one binary's services to call each other).
  std::shared_ptr<grpc::Channel> InProcessChannel();

  // Blocks until SIGINT or SIGTERM (see BlockTerminationSignals), then shuts the server down
  // (in-flight calls get a deadline).
  void RunUntilSignal();
  void Shutdown();

 private:
  ServiceHost() = default;
  std::unique_ptr<metrics::MetricsEndpoint> endpoint_;
  std::shared_ptr<tls::ServerSslContext> https_;
  std::unique_ptr<grpc::Server> server_;
  // Services with completion queues of their own (async_server.h), stopped before server_ goes.
  std::vector<AsyncServing*> async_;
  int grpc_port_ = 0;
};

}  // namespace tessera
