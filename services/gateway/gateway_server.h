#pragma once
// The REST gateway: JSON over HTTP (and Server-Sent Events for watches) for CI pipelines and
// scripts, translated to the gRPC API. Each request's Authorization header is forwarded
// unchanged as `authorization` metadata; the gRPC services decide.
//
//   GatewayServer gateway(grpc::CreateChannel("127.0.0.1:50051",
//   grpc::InsecureChannelCredentials())); if (absl::Status st = gateway.Start("127.0.0.1", 8080);
//   !st.ok()) ...
//   ...
//   gateway.Shutdown();  // or let the destructor do it
//
// The all-in-one tessera-server passes an in-process channel (grpc::Server::InProcessChannel).
//
// Threading: a few I/O threads (Boost.Asio; Beast for HTTP, as /metrics) serve every connection
// asynchronously, so an open event stream or an idle kept-alive connection costs no thread; the
// route handlers, which make blocking gRPC calls, run on a pool of their own. A slow upstream call
// holds one pool thread; a slow client holds nothing but its buffers, and is cut off by the
// request timeout. Every upstream call is registered for cancellation, so Shutdown() never waits
// on a client or an upstream.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "services/gateway/connection.h"
#include "services/gateway/route_table.h"
#include "services/gateway/upstream.h"
#include "transport/tls/server_ssl_context.h"

namespace tessera::gateway {

struct GatewayOptions {
  // Deadline of each unary upstream call (streams have none).
  std::chrono::milliseconds upstream_timeout{30000};
  // Connections served at once; more are answered 503. The process's open-file limit is raised
  // to its hard limit at Start, so that it does not bind first.
  std::size_t max_connections = 10000;
  // Connections served at once from one address; more are answered 429, so that one client
  // cannot take the whole of max_connections. (Clients behind one NAT share an address.)
  std::size_t max_connections_per_address = 1000;
  // Threads serving the sockets.
  int io_threads = 2;
  // Threads running route handlers (each upstream unary call blocks one while it runs).
  int handler_threads = 32;
  ConnectionLimits limits;  // body size (4 MiB), timeouts, SSE keep-alive
  // The LogService's channel, when it runs apart from the other services; null: the upstream
  // channel (the all-in-one server hosts it with the others).
  std::shared_ptr<grpc::Channel> logs_channel;
  // The web console's folder (ConsoleAssets), read at Start; empty: no console.
  std::string console_dir;
};

class GatewayServer {
 public:
  explicit GatewayServer(std::shared_ptr<grpc::Channel> upstream, GatewayOptions options = {});
  ~GatewayServer();  // Shutdown()
  GatewayServer(const GatewayServer&) = delete;
  GatewayServer& operator=(const GatewayServer&) = delete;

  // Listens on `address` (an IP literal or a host name) and `port` (0: any free port, see
  // port()) and starts serving. Once per server. A bad address or a failure to bind is an error
  // naming the address.
  absl::Status Start(const std::string& address, std::uint16_t port);

  // Serves HTTPS only, with the context's current certificate for each new connection. Before
  // Start.
  void ServeTls(std::shared_ptr<tls::ServerSslContext> tls);
  bool tls() const { return tls_ != nullptr; }

  // The port actually bound (0 before Start).
  std::uint16_t port() const { return port_; }

  // Stops accepting, cancels the upstream calls in flight, closes every connection (event
  // streams included) and joins every thread. Idempotent; returns promptly.
  void Shutdown();

  // The routes served, the ones the OpenAPI document lists.
  const RouteTable& routes() const { return routes_; }

  // Connections being served now.
  std::size_t active_connections() const { return connections_.size(); }

 private:
  void Accept();
  // Answers `status` (with an API error of `code` saying `message`) and closes the socket.
  void Refuse(boost::asio::ip::tcp::socket& socket, const char* status, const char* code,
              const std::string& message);

  const GatewayOptions options_;
  std::shared_ptr<Upstream> upstream_;
  RouteTable routes_;
  std::shared_ptr<tls::ServerSslContext> tls_;  // null: plain HTTP

  // Before the I/O context: connections still queued in it when it is destroyed remove
  // themselves from here.
  std::atomic<bool> stopping_{false};
  ConnectionSet connections_;
  boost::asio::io_context io_;
  boost::asio::thread_pool handlers_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer accept_retry_;
  ConnectionContext context_;
  std::vector<std::thread> io_threads_;
  std::uint16_t port_ = 0;
  absl::Mutex shutdown_mu_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace tessera::gateway
