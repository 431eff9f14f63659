#pragma once
// One client connection, served on its own thread: read a request (Beast's parser over a
// PolledStream), dispatch it, write the answer or relay the event stream, and again while the
// client keeps the connection alive.

#include <chrono>
#include <cstddef>
#include <string>

#include "services/gateway/route_table.h"
#include "services/gateway/sse_relay.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

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

// Serves the connection on `fd` (owned, closed on return) until the client closes it, a limit or
// an error ends it, or `wake_fd` becomes readable (the gateway is stopping). Malformed requests
// get a 400 (431 for a header too large, 413 for a body too large) and the connection is closed.
// Serves the connection `fd` until it closes. With `tls` (an OpenSSL SSL_CTX that outlives the
// call) the client must start with a TLS handshake, bounded by the request timeout.
void ServeConnection(int fd, int wake_fd, const std::string& peer, const RouteTable& routes,
                     const ConnectionLimits& limits, ssl_ctx_st* tls = nullptr);

}  // namespace tessera::gateway
