#include "services/gateway/connection.h"

// clang-format off
#include <utility>  // first: Boost 1.74 Asio uses std::exchange without including it
// clang-format on

#include <spdlog/spdlog.h>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "services/gateway/dispatch.h"
#include "services/gateway/errors.h"
#include "services/gateway/polled_stream.h"

namespace tessera::gateway {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

std::string ToStd(beast::string_view s) { return std::string(s.data(), s.size()); }
beast::string_view ToBeast(const std::string& s) { return {s.data(), s.size()}; }

bool IsHttpError(const beast::error_code& ec) {
  static const beast::error_code http_error = http::error::bad_target;
  return ec.category() == http_error.category();
}

class Connection {
 public:
  Connection(int fd, int wake_fd, const std::string& peer, const RouteTable& routes,
             const ConnectionLimits& limits)
      : stream_(fd, wake_fd), peer_(peer), routes_(routes), limits_(limits) {}

  void Serve(ssl_ctx_st* tls) {
    if (tls != nullptr) {
      stream_.expires_after(limits_.request_timeout);
      if (!stream_.AcceptTls(tls)) {
        spdlog::info("gateway: {} failed the TLS handshake", peer_);
        return;
      }
    }
    for (bool first = true;; first = false) {
      if (!ServeOne(first)) return;
    }
  }

 private:
  // Serves one request; false when the connection is done.
  bool ServeOne(bool first) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    parser.body_limit(limits_.max_body_bytes);
    // The first request may take request_timeout to arrive; later ones idle_timeout.
    stream_.expires_after(first ? limits_.request_timeout : limits_.idle_timeout);
    beast::error_code ec;
    http::read_header(stream_, buffer_, parser, ec);
    if (ec) return RejectOrClose(ec, 11);

    const auto& head = parser.get();
    const unsigned version = head.version();
    if (const auto length = parser.content_length();
        length.has_value() && *length > limits_.max_body_bytes) {
      return Reject(PayloadTooLarge(), version);
    }
    if (absl::EqualsIgnoreCase(ToStd(head[http::field::expect]), "100-continue") &&
        !parser.is_done()) {
      if (!stream_.WriteAll("HTTP/1.1 100 Continue\r\n\r\n", ec)) return false;
    }
    stream_.expires_after(limits_.request_timeout);
    if (!parser.is_done()) http::read(stream_, buffer_, parser, ec);
    if (ec) return RejectOrClose(ec, version);

    http::request<http::string_body> req = parser.release();
    const Clock::time_point start = Clock::now();
    WireRequest wire;
    wire.method = ToStd(req.method_string());
    wire.target = ToStd(req.target());
    for (const auto& field : req) {
      wire.headers.emplace(absl::AsciiStrToLower(ToStd(field.name_string())), ToStd(field.value()));
    }
    wire.body = std::move(req.body());
    wire.peer = peer_;
    const std::string method = wire.method;
    const std::string target = wire.target.substr(0, wire.target.find('?'));

    HandlerResult result = Dispatch(routes_, std::move(wire));
    if (auto* source = std::get_if<std::unique_ptr<EventSource>>(&result)) {
      RelayOutcome outcome = RelayEvents(stream_, std::move(*source), limits_.relay);
      if (outcome.response.has_value()) Write(*outcome.response, version, false);
      Log(method, target, outcome.status, start, outcome.events);
      return false;  // an event stream ends with the connection
    }
    const Response& response = std::get<Response>(result);
    const bool keep_alive = req.keep_alive();
    const bool written = Write(response, version, keep_alive);
    Log(method, target, response.status, start, -1);
    return written && keep_alive;
  }

  // After a read error: answers what was malformed, or just closes.
  bool RejectOrClose(const beast::error_code& ec, unsigned version) {
    if (!IsHttpError(ec) || ec == http::error::end_of_stream ||
        ec == http::error::partial_message) {
      return false;  // closed, reset, timed out or stopping
    }
    if (ec == http::error::body_limit) return Reject(PayloadTooLarge(), version);
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      return Reject(ErrorResponse(431, "REQUEST_HEADER_FIELDS_TOO_LARGE",
                                  "the request header is larger than " +
                                      std::to_string(limits_.max_header_bytes) + " bytes"),
                    version);
    }
    return Reject(BadRequest("malformed HTTP request: " + ec.message()), version);
  }

  Response PayloadTooLarge() const {
    return ErrorResponse(
        413, "PAYLOAD_TOO_LARGE",
        "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes");
  }

  // Answers and closes, letting the client finish sending first.
  bool Reject(const Response& response, unsigned version) {
    spdlog::info("gateway: {} rejected: {} {}", peer_, response.status, response.body);
    if (Write(response, version == 10 ? 10 : 11, false)) stream_.LingeringClose();
    return false;
  }

  bool Write(const Response& response, unsigned version, bool keep_alive) {
    http::response<http::string_body> res;
    res.version(version);
    res.result(static_cast<unsigned>(response.status));
    res.set(http::field::server, "tessera-gateway");
    if (!response.content_type.empty()) {
      res.set(http::field::content_type, ToBeast(response.content_type));
    }
    res.set(http::field::cache_control, "no-store");
    for (const auto& [name, value] : response.headers) res.set(ToBeast(name), ToBeast(value));
    res.body() = response.body;
    res.keep_alive(keep_alive);
    res.prepare_payload();
    stream_.expires_after(limits_.request_timeout);
    beast::error_code ec;
    http::write(stream_, res, ec);
    return !ec;
  }

  void Log(const std::string& method, const std::string& target, int status,
           Clock::time_point start, int events) const {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    if (events >= 0) {
      spdlog::info("gateway: {} {} {} -> {} ({} events, {} ms)", peer_, method, target, status,
                   events, ms);
    } else {
      spdlog::info("gateway: {} {} {} -> {} ({} ms)", peer_, method, target, status, ms);
    }
  }

  PolledStream stream_;
  beast::flat_buffer buffer_;
  const std::string peer_;
  const RouteTable& routes_;
  const ConnectionLimits& limits_;
};

}  // namespace

void ServeConnection(int fd, int wake_fd, const std::string& peer, const RouteTable& routes,
                     const ConnectionLimits& limits, ssl_ctx_st* tls) {
  Connection(fd, wake_fd, peer, routes, limits).Serve(tls);
}

}  // namespace tessera::gateway
