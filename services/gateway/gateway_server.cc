#include "services/gateway/gateway_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "services/gateway/errors.h"
#include "services/gateway/routes.h"

namespace tessera::gateway {
namespace {

std::string PeerName(const sockaddr_storage& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return absl::StrCat(host, ":", port);
}

// Best effort, without blocking: the connection is over the cap.
void RefuseBusy(int fd) {
  const std::string body =
      ErrorJson("UNAVAILABLE", "the gateway is serving too many connections; retry shortly");
  const std::string response = absl::StrCat(
      "HTTP/1.1 503 Service Unavailable\r\nServer: tessera-gateway\r\n"
      "Content-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n"
      "Content-Length: ",
      body.size(), "\r\n\r\n", body);
  [[maybe_unused]] const ssize_t n =
      ::send(fd, response.data(), response.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
  // Closing with unread bytes would reset the connection: drop what the client sent so far.
  char sink[4096];
  while (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
  ::close(fd);
}

}  // namespace

GatewayServer::GatewayServer(std::shared_ptr<grpc::Channel> upstream, GatewayOptions options)
    : options_(std::move(options)),
      upstream_(std::make_shared<Upstream>(std::move(upstream), options_.upstream_timeout,
                                           options_.logs_channel)),
      routes_(BuildRouteTable(upstream_)) {}

GatewayServer::~GatewayServer() { Shutdown(); }

absl::Status GatewayServer::Start(const std::string& address, std::uint16_t port) {
  std::lock_guard lock(shutdown_mu_);
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

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(address.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gateway: cannot resolve address \"", address, "\": ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string error = "no usable address";
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      error = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0)
    return absl::UnavailableError(absl::StrCat("gateway: cannot listen on ", where, ": ", error));

  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = static_cast<std::uint16_t>(bound.ss_family == AF_INET6
                                         ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port));
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("gateway: eventfd: ", std::strerror(errno)));
  }
  listen_fd_ = fd;
  started_ = true;
  acceptor_ = std::thread([this] { AcceptLoop(); });
  spdlog::info("gateway: serving REST on http://{}:{} ({} routes)", address, port_,
               routes_.routes().size());
  return absl::OkStatus();
}

void GatewayServer::AcceptLoop() {
  for (;;) {
    ReapFinished();
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("gateway: poll: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;  // stopping
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) {
        continue;
      }
      // Out of descriptors, say: back off rather than spin (but wake for a shutdown).
      spdlog::warn("gateway: accept: {}", std::strerror(errno));
      pollfd wake = {wake_fd_, POLLIN, 0};
      if (::poll(&wake, 1, 100) > 0) return;
      continue;
    }
    if (active_.load() >= options_.max_connections) {
      spdlog::warn("gateway: {} connections open, refusing {}", active_.load(), PeerName(addr));
      RefuseBusy(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    Spawn(fd, PeerName(addr));
  }
}

void GatewayServer::ServeTls(std::shared_ptr<tls::ServerSslContext> tls) {
  // OpenSSL writes to the socket with write(2): a client gone mid-response must be an error
  // (EPIPE), not a signal that ends the process.
  std::signal(SIGPIPE, SIG_IGN);
  tls_ = std::move(tls);
}

void GatewayServer::Spawn(int fd, std::string peer) {
  ++active_;
  Worker& w = workers_.emplace_back();
  std::shared_ptr<boost::asio::ssl::context> tls = tls_ ? tls_->Current() : nullptr;
  w.thread = std::thread([this, fd, peer = std::move(peer), &w, tls = std::move(tls)] {
    ServeConnection(fd, wake_fd_, peer, routes_, options_.limits,
                    tls ? tls->native_handle() : nullptr);
    --active_;
    w.done.store(true);
  });
}

void GatewayServer::ReapFinished() {
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->done.load()) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void GatewayServer::Shutdown() {
  std::lock_guard lock(shutdown_mu_);
  if (!started_ || stopped_) return;
  stopped_ = true;
  const std::uint64_t one = 1;
  // Never read back: the descriptor stays readable, so every poll on it returns at once.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  upstream_->CancelAll();
  acceptor_.join();
  for (Worker& w : workers_) w.thread.join();
  workers_.clear();
  ::close(listen_fd_);
  ::close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
  spdlog::info("gateway: stopped");
}

}  // namespace tessera::gateway
