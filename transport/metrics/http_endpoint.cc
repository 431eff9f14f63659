#include "transport/metrics/http_endpoint.h"

// clang-format off
#include <utility>  // first: Boost 1.74 Asio uses std::exchange without including it
// clang-format on

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <exception>
#include <map>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "fmt/format.h"
#include "spdlog/spdlog.h"
#include "transport/metrics/text_format.h"
#include "transport/tls/server_ssl_context.h"

namespace tessera::metrics {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
namespace ssl = net::ssl;

constexpr int kThreads = 2;
// A connection idle (or trickling a request) this long is closed.
constexpr std::chrono::seconds kIdleTimeout{30};
constexpr std::uint64_t kBodyLimit = 64 * 1024;
constexpr const char* kServerName = "tessera-metrics";

// Beast (Boost 1.74) has its own string_view.
std::string_view ToStd(beast::string_view s) { return {s.data(), s.size()}; }
beast::string_view ToBeast(std::string_view s) { return {s.data(), s.size()}; }

using Response = http::response<http::string_body>;

// The path anyone who reaches the port may GET: a liveness probe carries no token.
constexpr std::string_view kOpenPath = "/healthz";

// The routes, shared by every connection.
class Router {
 public:
  explicit Router(ScrapeAccess access) : access_(std::move(access)) {}

  void Add(std::string path, RouteHandler handler) {
    absl::MutexLock lock(&mu_);
    routes_[std::move(path)] = std::make_shared<RouteHandler>(std::move(handler));
  }

  HttpResponse Handle(http::verb method, std::string_view target,
                      std::string_view authorization) const {
    HttpRequest request;
    const std::size_t q = target.find('?');
    request.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) request.query = std::string(target.substr(q + 1));

    if (method != http::verb::get) {
      return HttpResponse{405, "text/plain; charset=utf-8", "method not allowed\n"};
    }
    if (request.path != kOpenPath) {
      if (absl::Status allowed = access_.Check(authorization); !allowed.ok()) {
        const int status = absl::IsUnauthenticated(allowed) ? 401 : 403;
        return HttpResponse{status, "text/plain; charset=utf-8",
                            std::string(allowed.message()) + "\n"};
      }
    }
    std::shared_ptr<RouteHandler> handler;
    {
      absl::MutexLock lock(&mu_);
      auto it = routes_.find(request.path);
      if (it != routes_.end()) handler = it->second;
    }
    if (handler == nullptr) return HttpResponse{404, "text/plain; charset=utf-8", "not found\n"};
    try {
      return (*handler)(request);
    } catch (const std::exception& e) {
      spdlog::error("metrics endpoint: handler for {} threw: {}", request.path, e.what());
    } catch (...) {
      spdlog::error("metrics endpoint: handler for {} threw", request.path);
    }
    return HttpResponse{500, "text/plain; charset=utf-8", "internal error\n"};
  }

 private:
  const ScrapeAccess access_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<RouteHandler>, std::less<>> routes_ ABSL_GUARDED_BY(mu_);
};

// One connection: read a request, answer it, and again while the client keeps it alive.
// `Stream` is a beast::tcp_stream, or a beast::ssl_stream over one (TLS).
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Session(tcp::socket socket, std::shared_ptr<const Router> router,
          std::shared_ptr<ssl::context> tls)
      : tls_(std::move(tls)), stream_(MakeStream(std::move(socket))), router_(std::move(router)) {}

  void Start() {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&Session::Begin, this->shared_from_this()));
  }

 private:
  Stream MakeStream(tcp::socket socket) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls_);
    } else {
      return Stream(std::move(socket));
    }
  }

  void Begin() {
    if constexpr (kTls) {
      beast::get_lowest_layer(stream_).expires_after(kIdleTimeout);
      stream_.async_handshake(
          ssl::stream_base::server,
          beast::bind_front_handler(&Session::OnHandshake, this->shared_from_this()));
    } else {
      Read();
    }
  }

  void OnHandshake(beast::error_code ec) {
    if (ec) return Close();  // not TLS, a bad certificate, a timeout
    Read();
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(kBodyLimit);
    beast::get_lowest_layer(stream_).expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, this->shared_from_this()));
  }

  void OnRead(beast::error_code ec, std::size_t /*bytes*/) {
    if (ec == http::error::end_of_stream || ec == net::error::eof) return Close();
    if (ec) {
      // A request that does not parse gets a 400 and the connection is closed; a timeout or a
      // reset just closes it.
      const beast::error_code http_error = http::error::bad_target;
      if (ec.category() == http_error.category()) {
        Response res{http::status::bad_request, 11};
        res.set(http::field::server, kServerName);
        res.set(http::field::content_type, "text/plain; charset=utf-8");
        res.body() = "bad request\n";
        res.keep_alive(false);
        res.prepare_payload();
        return Write(std::move(res));
      }
      return Close();
    }
    const auto& req = parser_->get();
    HttpResponse answer =
        router_->Handle(req.method(), ToStd(req.target()), ToStd(req[http::field::authorization]));
    if (answer.status < 100 || answer.status > 999) {
      spdlog::error("metrics endpoint: handler for {} returned status {}", ToStd(req.target()),
                    answer.status);
      answer = HttpResponse{500, "text/plain; charset=utf-8", "internal error\n"};
    }
    Response res;
    res.result(static_cast<unsigned>(answer.status));
    res.version(req.version());
    res.set(http::field::server, kServerName);
    res.set(http::field::content_type, ToBeast(answer.content_type));
    if (answer.status == 405) res.set(http::field::allow, "GET");
    if (answer.status == 401) res.set(http::field::www_authenticate, "Bearer realm=\"metrics\"");
    res.body() = std::move(answer.body);
    res.keep_alive(req.keep_alive());
    res.prepare_payload();
    Write(std::move(res));
  }

  void Write(Response res) {
    response_ = std::move(res);
    http::async_write(stream_, response_,
                      beast::bind_front_handler(&Session::OnWrite, this->shared_from_this()));
  }

  void OnWrite(beast::error_code ec, std::size_t /*bytes*/) {
    if (ec || !response_.keep_alive()) return Close();
    Read();
  }

  void Close() {
    beast::error_code ignored;
    auto& socket = beast::get_lowest_layer(stream_).socket();
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    socket.close(ignored);
  }

  std::shared_ptr<ssl::context> tls_;  // kept alive while the stream uses it
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Response response_;
  std::shared_ptr<const Router> router_;
};

}  // namespace

struct MetricsEndpoint::Impl {
  net::io_context ioc{kThreads};
  net::strand<net::io_context::executor_type> strand = net::make_strand(ioc);
  tcp::acceptor acceptor{strand};
  net::steady_timer retry{strand};
  std::shared_ptr<Router> router;
  std::shared_ptr<tls::ServerSslContext> tls;  // null: plain HTTP
  std::vector<std::thread> threads;
  std::uint16_t port = 0;

  ~Impl() {
    ioc.stop();
    for (std::thread& t : threads) t.join();
    // What is left (the acceptor, pending connections) is destroyed with `ioc`, after the threads.
  }

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) {
        if (tls != nullptr) {
          std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(std::move(socket), router,
                                                                          tls->Current())
              ->Start();
        } else {
          std::make_shared<Session<beast::tcp_stream>>(std::move(socket), router, nullptr)->Start();
        }
        return Accept();
      }
      // Out of descriptors, say: back off rather than spin.
      spdlog::warn("metrics endpoint: accept failed: {}", ec.message());
      retry.expires_after(std::chrono::milliseconds(100));
      retry.async_wait([this](beast::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
    });
  }
};

MetricsEndpoint::MetricsEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsEndpoint::~MetricsEndpoint() = default;

std::uint16_t MetricsEndpoint::port() const { return impl_->port; }

void MetricsEndpoint::AddRoute(std::string path, RouteHandler handler) {
  impl_->router->Add(std::move(path), std::move(handler));
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    std::string_view address, std::uint16_t port, ScrapeAccess access, Registry& registry,
    std::shared_ptr<tls::ServerSslContext> tls) {
  auto impl = std::make_unique<Impl>();
  const std::string who(access.Who());
  impl->router = std::make_shared<Router>(std::move(access));
  impl->tls = std::move(tls);
  const std::string where = fmt::format("{}:{}", address, port);

  beast::error_code ec;
  tcp::endpoint endpoint;
  const net::ip::address ip = net::ip::make_address(std::string(address), ec);
  if (!ec) {
    endpoint = tcp::endpoint(ip, port);
  } else {
    tcp::resolver resolver(impl->ioc);
    const auto results =
        resolver.resolve(std::string(address), std::to_string(port),
                         tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("metrics endpoint: cannot resolve address \"{}\": {}", address,
                      ec ? ec.message() : std::string("no results")));
    }
    endpoint = results.begin()->endpoint();
  }

  tcp::acceptor& acceptor = impl->acceptor;
  auto fail = [&](std::string_view step) {
    return absl::UnavailableError(
        fmt::format("metrics endpoint: cannot {} on {}: {}", step, where, ec.message()));
  };
  if (acceptor.open(endpoint.protocol(), ec)) return fail("open a socket");
  if (acceptor.set_option(net::socket_base::reuse_address(true), ec)) return fail("set options");
  if (acceptor.bind(endpoint, ec)) return fail("bind");
  if (acceptor.listen(net::socket_base::max_listen_connections, ec)) return fail("listen");
  const tcp::endpoint local = acceptor.local_endpoint(ec);
  if (ec) return fail("read the bound port");
  impl->port = local.port();

  impl->router->Add("/metrics", [&registry](const HttpRequest&) {
    return HttpResponse{200, std::string(kTextContentType), RenderText(registry)};
  });
  impl->router->Add("/healthz", [](const HttpRequest&) {
    return HttpResponse{200, "text/plain; charset=utf-8", "ok"};
  });

  impl->Accept();
  for (int i = 0; i < kThreads; ++i) {
    impl->threads.emplace_back([ioc = &impl->ioc] { ioc->run(); });
  }
  std::unique_ptr<MetricsEndpoint> out(new MetricsEndpoint(std::move(impl)));
  spdlog::info("metrics endpoint listening on {}://{}:{} (/metrics for {})",
               out->impl_->tls ? "https" : "http", address, out->port(), who);
  return out;
}

}  // namespace tessera::metrics
