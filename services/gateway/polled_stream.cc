#include "services/gateway/polled_stream.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/error.hpp>
#include <cerrno>

namespace tessera::gateway {
namespace {

namespace net = boost::asio;

boost::beast::error_code ErrnoCode(int err) {
  return boost::beast::error_code(err, boost::system::system_category());
}

int RemainingMs(PolledStream::Clock::time_point deadline) {
  if (deadline == PolledStream::Clock::time_point::max()) return -1;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - PolledStream::Clock::now())
          .count();
  if (left <= 0) return 0;
  return left > 24 * 3600 * 1000 ? 24 * 3600 * 1000 : static_cast<int>(left);
}

}  // namespace

PolledStream::PolledStream(int fd, int wake_fd) : fd_(fd), wake_fd_(wake_fd) {
  const int flags = ::fcntl(fd_, F_GETFL, 0);
  if (flags >= 0) ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
}

PolledStream::~PolledStream() {
  if (ssl_ != nullptr) {
    SSL_shutdown(ssl_);  // best effort: a close_notify if the socket takes it now
    SSL_free(ssl_);
    ERR_clear_error();
  }
  if (fd_ >= 0) ::close(fd_);
}

boost::beast::error_code PolledStream::WaitError(Wait w) const {
  switch (w) {
    case Wait::kTimeout:
      return net::error::timed_out;
    case Wait::kWake:
      return net::error::operation_aborted;
    default:
      return ErrnoCode(errno);
  }
}

bool PolledStream::WaitForTls(int result, boost::beast::error_code& ec) {
  const int err = SSL_get_error(ssl_, result);
  ERR_clear_error();
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    const Wait w = WaitFor(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT);
    if (w == Wait::kReady) return true;
    ec = WaitError(w);
    return false;
  }
  if (err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && errno == 0)) {
    ec = net::error::eof;  // close_notify, or the peer just closed
  } else if (err == SSL_ERROR_SYSCALL) {
    ec = ErrnoCode(errno);
  } else {
    ec = ErrnoCode(EPROTO);  // not TLS, or a TLS error
  }
  return false;
}

bool PolledStream::AcceptTls(ssl_ctx_st* ctx) {
  ssl_ = SSL_new(ctx);
  if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) return false;
  for (;;) {
    const int r = SSL_accept(ssl_);
    if (r == 1) return true;
    boost::beast::error_code ec;
    if (!WaitForTls(r, ec)) return false;
  }
}

PolledStream::Wait PolledStream::WaitFor(short events) {
  for (;;) {
    pollfd fds[2] = {{fd_, events, 0}, {wake_fd_, POLLIN, 0}};
    const int timeout = RemainingMs(deadline_);
    const int n = ::poll(fds, 2, timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Wait::kError;
    }
    if (fds[1].revents != 0) return Wait::kWake;
    if (fds[0].revents != 0) return Wait::kReady;  // errors and hang-ups show in the next call
    if (n == 0 && timeout >= 0 && RemainingMs(deadline_) == 0) return Wait::kTimeout;
  }
}

std::size_t PolledStream::ReadSome(void* data, std::size_t size, boost::beast::error_code& ec) {
  while (ssl_ != nullptr) {
    const int n = SSL_read(ssl_, data, static_cast<int>(size > (1u << 30) ? (1u << 30) : size));
    if (n > 0) {
      ec = {};
      return static_cast<std::size_t>(n);
    }
    if (!WaitForTls(n, ec)) return 0;
  }
  for (;;) {
    const ssize_t n = ::recv(fd_, data, size, 0);
    if (n > 0) {
      ec = {};
      return static_cast<std::size_t>(n);
    }
    if (n == 0) {
      ec = net::error::eof;
      return 0;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = ErrnoCode(errno);
      return 0;
    }
    const Wait w = WaitFor(POLLIN);
    if (w == Wait::kReady) continue;
    ec = WaitError(w);
    return 0;
  }
}

std::size_t PolledStream::WriteSome(const iovec* iov, int count, boost::beast::error_code& ec) {
  // TLS writes one buffer at a time (a write may be partial); a retried SSL_write must repeat
  // the same arguments, which the loop does.
  while (ssl_ != nullptr) {
    const std::size_t size = iov[0].iov_len > (1u << 30) ? (1u << 30) : iov[0].iov_len;
    const int n = SSL_write(ssl_, iov[0].iov_base, static_cast<int>(size));
    if (n > 0) {
      ec = {};
      return static_cast<std::size_t>(n);
    }
    if (!WaitForTls(n, ec)) return 0;
  }
  for (;;) {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n >= 0) {
      ec = {};
      return static_cast<std::size_t>(n);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      ec = ErrnoCode(errno);
      return 0;
    }
    const Wait w = WaitFor(POLLOUT);
    if (w == Wait::kReady) continue;
    ec = WaitError(w);
    return 0;
  }
}

bool PolledStream::WriteAll(std::string_view data, boost::beast::error_code& ec) {
  while (!data.empty()) {
    iovec iov{const_cast<char*>(data.data()), data.size()};
    const std::size_t n = WriteSome(&iov, 1, ec);
    if (ec) return false;
    data.remove_prefix(n);
  }
  return true;
}

void PolledStream::LingeringClose() {
  if (ssl_ != nullptr) SSL_shutdown(ssl_);
  ::shutdown(fd_, SHUT_WR);
  expires_after(std::chrono::seconds(2));
  char sink[16 * 1024];
  std::size_t dropped = 0;
  boost::beast::error_code ec;
  // At most a few MiB: enough for a body the client was already sending.
  while (dropped < (8u << 20)) {
    const std::size_t n = ReadSome(sink, sizeof sink, ec);
    if (ec) break;
    dropped += n;
  }
}

}  // namespace tessera::gateway
