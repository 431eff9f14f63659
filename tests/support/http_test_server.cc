#include "tests/support/http_test_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tessera::testing {
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

struct HttpTestServer::Impl {
  boost::asio::io_context io;
  tcp::acceptor acceptor{io};
};

HttpTestServer::HttpTestServer(Handler handler)
    : handler_(std::move(handler)), impl_(std::make_unique<Impl>()) {
  const tcp::endpoint endpoint(boost::asio::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  acceptor_ = std::thread([this] {
    while (!stopping_) {
      boost::system::error_code ec;
      tcp::socket socket(impl_->io);
      impl_->acceptor.accept(socket, ec);
      if (ec || stopping_) break;
      const int fd = socket.release(ec);
      if (ec) continue;
      absl::MutexLock lock(&mu_);
      open_fds_.push_back(fd);
      connections_.emplace_back([this, fd] { Serve(fd); });
    }
  });
}

HttpTestServer::~HttpTestServer() {
  stopping_ = true;
  boost::system::error_code ec;
  // Wakes the acceptor (shutdown of a listening socket ends a blocked accept on Linux).
  ::shutdown(impl_->acceptor.native_handle(), SHUT_RDWR);
  acceptor_.join();
  impl_->acceptor.close(ec);
  std::vector<std::thread> connections;
  {
    absl::MutexLock lock(&mu_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);  // ends reads and stalls
    connections.swap(connections_);
  }
  for (auto& t : connections) t.join();
}

std::string HttpTestServer::url() const { return absl::StrCat("http://127.0.0.1:", port_); }

std::vector<HttpTestRequest> HttpTestServer::requests() {
  absl::MutexLock lock(&mu_);
  return requests_;
}

void HttpTestServer::ClearRequests() {
  absl::MutexLock lock(&mu_);
  requests_.clear();
}

void HttpTestServer::Serve(int fd) {
  boost::asio::io_context io;
  tcp::socket socket(io, tcp::v4(), fd);
  boost::beast::flat_buffer buffer;
  boost::system::error_code ec;
  while (!stopping_) {
    http::request<http::string_body> req;
    http::read(socket, buffer, req, ec);
    if (ec) break;
    HttpTestRequest recorded;
    recorded.method = std::string(req.method_string());
    recorded.target = std::string(req.target());
    recorded.body = req.body();
    for (const auto& field : req) {
      recorded.headers[absl::AsciiStrToLower(std::string(field.name_string()))] =
          std::string(field.value());
    }
    {
      absl::MutexLock lock(&mu_);
      requests_.push_back(recorded);
    }
    const HttpTestResponse answer = handler_(recorded);
    std::string head = absl::StrCat("HTTP/1.1 ", answer.status, " X\r\n");
    for (const auto& [name, value] : answer.headers)
      absl::StrAppend(&head, name, ": ", value, "\r\n");
    absl::StrAppend(&head, "Content-Length: ", answer.body.size(), "\r\n\r\n");
    const size_t send = answer.stall_after < 0
                            ? answer.body.size()
                            : std::min(answer.body.size(), static_cast<size_t>(answer.stall_after));
    boost::asio::write(socket, boost::asio::buffer(head), ec);
    if (!ec) boost::asio::write(socket, boost::asio::buffer(answer.body.data(), send), ec);
    if (ec) break;
    if (answer.stall_after >= 0) {
      // Stalled: wait for the client to hang up or the server to stop.
      char byte;
      while (!stopping_ && ::recv(fd, &byte, 1, 0) > 0) {
      }
      break;
    }
    if (!req.keep_alive()) break;
  }
  {
    absl::MutexLock lock(&mu_);
    std::erase(open_fds_, fd);  // before the close: the number may be reused at once
  }
  socket.shutdown(tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

}  // namespace tessera::testing
