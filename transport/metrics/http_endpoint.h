#pragma once
// The HTTP endpoint every binary starts: GET /metrics (the Prometheus text format), GET /healthz,
// and any GET routes the binary adds. Boost.Beast, on its own threads; Boost stays out of this
// header. Every route but /healthz is served only to whom the ScrapeAccess allows (a refused
// request gets 401 with `WWW-Authenticate: Bearer`, or 403 when no one may read).
//
//   auto endpoint = MetricsEndpoint::Start("0.0.0.0", 9090, *ScrapeAccess::Load(flags));
//   if (!endpoint.ok()) return endpoint.status();
//   (*endpoint)->AddRoute("/readyz", [&](const HttpRequest&) { return HttpResponse{...}; });
//
// Unknown paths answer 404, methods other than GET 405, unparseable requests 400 (and the
// connection is closed; the server carries on). Connections are kept alive when the client asks.
// Destroying the endpoint stops it: it closes the listener and every connection and joins its
// threads.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "transport/metrics/registry.h"
#include "transport/metrics/scrape_access.h"

namespace tessera::tls {
class ServerSslContext;
}

namespace tessera::metrics {

struct HttpRequest {
  std::string path;   // the target without its query, e.g. "/metrics"
  std::string query;  // what followed '?', undecoded; empty if none
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Called on one of the endpoint's threads, possibly concurrently with other calls; it should be
// quick (a slow handler holds up one of the endpoint's two threads). An exception becomes a 500.
using RouteHandler = std::function<HttpResponse(const HttpRequest&)>;

class MetricsEndpoint {
 public:
  // Listens on `address` (an IP literal or a host name that resolves) and `port` (0: any free
  // port, see port()). `access` says who may read every route but /healthz. `registry` is what
  // /metrics serves; it must outlive the endpoint. A bad address or a failure to bind is an
  // error naming the address. With `tls`, it serves HTTPS only (each connection gets the
  // context's current certificate).
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      std::string_view address, std::uint16_t port, ScrapeAccess access,
      Registry& registry = Registry::Default(),
      std::shared_ptr<tls::ServerSslContext> tls = nullptr);

  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The port actually bound.
  std::uint16_t port() const;

  // Serves GET `path` (exact match, query ignored) with `handler`, replacing any route there,
  // the built-in /metrics and /healthz included (/healthz stays open to anyone). Safe to call
  // while serving.
  void AddRoute(std::string path, RouteHandler handler);

 private:
  struct Impl;
  explicit MetricsEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::metrics
