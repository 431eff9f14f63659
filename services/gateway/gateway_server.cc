#include "services/gateway/gateway_server.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <csignal>

#include "absl/strings/str_cat.h"
#include "services/gateway/errors.h"
#include "services/gateway/routes.h"

namespace tessera::gateway {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// Each connection is a descriptor: the soft limit (often 1,024) would refuse connections long
// before max_connections. Raised to the hard limit, which needs no privilege.
void RaiseOpenFileLimit(std::size_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < wanted + 64) {
    spdlog::warn("gateway: the open-file limit ({}) is below --max-connections ({})",
                 limit.rlim_cur, wanted);
  }
}

// The client's IP address, without its port ("?" when the socket has none).
std::string AddressOf(const tcp::socket& socket) {
  boost::system::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return "?";
  return peer.address().to_string(ec);
}

std::string PeerName(const tcp::socket& socket) {
  boost::system::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return "?";
  return absl::StrCat(peer.address().to_string(ec), ":", peer.port());
}

}  // namespace

GatewayServer::GatewayServer(std::shared_ptr<grpc::Channel> upstream, GatewayOptions options)
    : options_(std::move(options)),
      upstream_(std::make_shared<Upstream>(std::move(upstream), options_.upstream_timeout,
                                           options_.logs_channel)),
      routes_(BuildRouteTable(upstream_)),
      handlers_(static_cast<std::size_t>(std::max(1, options_.handler_threads))),
      acceptor_(io_),
      accept_retry_(io_),
      context_{routes_, options_.limits, handlers_, stopping_, connections_} {}

GatewayServer::~GatewayServer() { Shutdown(); }

absl::Status GatewayServer::Start(const std::string& address, std::uint16_t port) {
  absl::MutexLock lock(&shutdown_mu_);
  if (started_) return absl::FailedPreconditionError("gateway: already started");
  if (!routes_.status().ok()) return routes_.status();
  if (!options_.console_dir.empty()) {
    auto console = ConsoleAssets::Load(options_.console_dir);
    if (!console.ok()) return console.status();
    spdlog::info("gateway: serving the web console from {} ({} files)", (*console)->folder(),
                 (*console)->file_count());
    routes_.SetConsole(*std::move(console));
  }
  const std::string where = absl::StrCat(address, ":", port);

  boost::system::error_code ec;
  tcp::endpoint endpoint;
  const net::ip::address ip = net::ip::make_address(address, ec);
  if (!ec) {
    endpoint = tcp::endpoint(ip, port);
  } else {
    tcp::resolver resolver(io_);
    const auto results = resolver.resolve(
        address, std::to_string(port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("gateway: cannot resolve address \"", address,
                       "\": ", ec ? ec.message() : std::string("no results")));
    }
    endpoint = results.begin()->endpoint();
  }
  auto fail = [&](const char* step) {
    return absl::UnavailableError(
        absl::StrCat("gateway: cannot ", step, " on ", where, ": ", ec.message()));
  };
  if (acceptor_.open(endpoint.protocol(), ec)) return fail("open a socket");
  if (acceptor_.set_option(net::socket_base::reuse_address(true), ec)) return fail("listen");
  if (acceptor_.bind(endpoint, ec)) return fail("listen");
  if (acceptor_.listen(net::socket_base::max_listen_connections, ec)) return fail("listen");
  port_ = acceptor_.local_endpoint(ec).port();
  if (ec) return fail("read the bound port");

  RaiseOpenFileLimit(options_.max_connections);
  started_ = true;
  Accept();
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    io_threads_.emplace_back([this] { io_.run(); });
  }
  spdlog::info("gateway: serving REST on {}://{}:{} ({} routes)", tls_ ? "https" : "http", address,
               port_, routes_.routes().size());
  return absl::OkStatus();
}

void GatewayServer::Accept() {
  acceptor_.async_accept(
      net::make_strand(io_), [this](boost::system::error_code ec, tcp::socket socket) {
        if (stopping_.load() || ec == net::error::operation_aborted || !acceptor_.is_open()) return;
        if (ec) {
          // Out of descriptors, say: back off rather than spin.
          spdlog::warn("gateway: accept: {}", ec.message());
          accept_retry_.expires_after(std::chrono::milliseconds(100));
          accept_retry_.async_wait([this](boost::system::error_code wait_ec) {
            if (!wait_ec) Accept();
          });
          return;
        }
        std::string address = AddressOf(socket);
        if (connections_.size() >= options_.max_connections) {
          Refuse(socket, "503 Service Unavailable", "UNAVAILABLE",
                 "the gateway is serving too many connections; retry shortly");
        } else if (connections_.CountFrom(address) >= options_.max_connections_per_address) {
          Refuse(socket, "429 Too Many Requests", "RESOURCE_EXHAUSTED",
                 absl::StrCat("this address has ", options_.max_connections_per_address,
                              " connections open, the most one address may "
                              "(tessera-gateway --max-connections-per-address); close some"));
        } else {
          boost::system::error_code ignored;
          socket.set_option(net::socket_base::keep_alive(true), ignored);
          std::string peer = PeerName(socket);
          StartConnection(std::move(socket), std::move(address), std::move(peer),
                          tls_ ? tls_->Current() : nullptr, context_);
        }
        Accept();
      });
}

// Best effort, without blocking: the connection is over a cap.
void GatewayServer::Refuse(tcp::socket& socket, const char* status, const char* code,
                           const std::string& message) {
  spdlog::warn("gateway: {} connections open, refusing {}: {}", connections_.size(),
               PeerName(socket), message);
  const std::string body = ErrorJson(code, message);
  const std::string response =
      absl::StrCat("HTTP/1.1 ", status,
                   "\r\nServer: tessera-gateway\r\n"
                   "Content-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n"
                   "Content-Length: ",
                   body.size(), "\r\n\r\n", body);
  const int fd = socket.native_handle();
  [[maybe_unused]] const ssize_t n =
      ::send(fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  // Closing with unread bytes would reset the connection: drop what the client sent so far.
  char sink[4096];
  while (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  boost::system::error_code ignored;
  socket.close(ignored);
}

void GatewayServer::ServeTls(std::shared_ptr<tls::ServerSslContext> tls) {
  // OpenSSL writes to the socket with write(2): a client gone mid-response must be an error
  // (EPIPE), not a signal that ends the process.
  std::signal(SIGPIPE, SIG_IGN);
  tls_ = std::move(tls);
}

void GatewayServer::Shutdown() {
  absl::MutexLock lock(&shutdown_mu_);
  if (!started_ || stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  net::post(io_, [this] {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    accept_retry_.cancel();
  });
  upstream_->CancelAll();
  connections_.StopAll();
  // Every stream ends once its cancelled call does. A connection still open after a second is
  // asked again (a stop that came while its request was being read or handled); one still open
  // after that is dropped with the I/O context.
  if (!connections_.WaitEmpty(std::chrono::seconds(1))) connections_.StopAll();
  if (!connections_.WaitEmpty(std::chrono::seconds(3))) {
    spdlog::warn("gateway: {} connections still open at shutdown", connections_.size());
  }
  handlers_.join();
  io_.stop();
  for (std::thread& t : io_threads_) t.join();
  io_threads_.clear();
  spdlog::info("gateway: stopped");
}

}  // namespace tessera::gateway
