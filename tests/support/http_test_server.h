#pragma once
// A small HTTP/1.1 server on a loopback port for tests of HTTP clients (the registry client):
// each request goes to a handler that answers it whole, or in parts with pauses (a slow or
// stalled server). Records every request. Connections are kept alive as the client asks.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera::testing {

struct HttpTestRequest {
  std::string method;
  std::string target;                          // path and query, as sent
  std::map<std::string, std::string> headers;  // names lower case
  std::string body;
};

struct HttpTestResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Sends only the first `stall_after` bytes of the body, then waits until the server stops
  // (or the client hangs up): a stalled transfer. -1: the whole body.
  int64_t stall_after = -1;
};

class HttpTestServer {
 public:
  using Handler = std::function<HttpTestResponse(const HttpTestRequest&)>;
  explicit HttpTestServer(Handler handler);
  ~HttpTestServer();  // stops: stalled responses end, the listener closes
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  int port() const { return port_; }
  std::string url() const;  // "http://127.0.0.1:PORT"
  std::vector<HttpTestRequest> requests();
  void ClearRequests();

 private:
  struct Impl;
  void Serve(int fd);
  Handler handler_;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  absl::Mutex mu_;
  std::vector<HttpTestRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> connections_ ABSL_GUARDED_BY(mu_);
  std::vector<int> open_fds_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::testing
