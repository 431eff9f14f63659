#pragma once
// One client connection, served asynchronously (Boost.Beast over Asio, like /metrics): read a
// request, dispatch it on the handler pool (a route's upstream gRPC call blocks), write the
// answer or relay the event stream, and again while the client keeps the connection alive.
// Waiting for a client costs no thread: an open event stream is a few buffers and a timer.
// Beast's tcp_stream times every read and write, so a slow or idle client is cut off.

// clang-format off
#include <utility>  // first: Boost 1.74 Asio uses std::exchange without including it
// clang-format on

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "services/gateway/route_table.h"
#include "services/gateway/sse_relay.h"

namespace tessera::gateway {

struct ConnectionLimits {
  std::size_t max_body_bytes = 4u << 20;
  std::size_t max_header_bytes = 16u << 10;
  // To read one request's header, then its body, then to write the response.
  std::chrono::milliseconds request_timeout{60000};
  // How long a kept-alive connection may wait for its next request.
  std::chrono::milliseconds idle_timeout{60000};
  RelayOptions relay;
};

class Connection {
 public:
  virtual ~Connection() = default;
  // Ends the connection soon (its event stream cancelled, its socket closed). Any thread.
  virtual void Stop() = 0;
};

// The connections open now, so that the gateway can count and stop them.
class ConnectionSet {
 public:
  // False once StopAll has run: a connection accepted while the gateway was stopping is not
  // served (it would outlive the stop), and the caller drops it.
  [[nodiscard]] bool Add(const std::shared_ptr<Connection>& connection, std::string address);
  void Remove(const Connection* connection);
  std::size_t size() const;
  // Connections open now from the client `address` (an IP address, no port).
  std::size_t CountFrom(const std::string& address) const;
  // Stops every open connection, and refuses any added later.
  void StopAll();
  // Waits until every connection is gone, at most `timeout`; false when some are left.
  bool WaitEmpty(std::chrono::milliseconds timeout);

 private:
  bool Empty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_.empty(); }

  mutable absl::Mutex mu_;
  struct Open {
    std::weak_ptr<Connection> connection;
    std::string address;
  };
  std::unordered_map<const Connection*, Open> open_;
  std::unordered_map<std::string, std::size_t> per_address_;
  bool stopped_ = false;
};

// What every connection of one gateway shares; outlives them all.
struct ConnectionContext {
  const RouteTable& routes;
  const ConnectionLimits& limits;
  boost::asio::thread_pool& handlers;  // where Dispatch runs
  const std::atomic<bool>& stopping;   // the gateway is shutting down
  ConnectionSet& connections;
};

// Serves `socket` until the client closes it, a limit or an error ends it, or Stop(). Malformed
// requests get a 400 (431 for a header too large, 413 for a body too large) and the connection
// is closed. With `tls`, the client must start with a TLS handshake, bounded by the request
// timeout.
// `address` is the client's IP address (counted per address), `peer` it with its port (logs).
void StartConnection(boost::asio::ip::tcp::socket socket, std::string address, std::string peer,
                     std::shared_ptr<boost::asio::ssl::context> tls,
                     const ConnectionContext& context);

}  // namespace tessera::gateway
