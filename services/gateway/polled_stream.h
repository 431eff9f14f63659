#pragma once
// A client connection as a Beast SyncReadStream/SyncWriteStream: a non-blocking socket that
// waits in poll(2) for each read or write, up to a deadline, and gives up at once when the
// gateway's shutdown descriptor becomes readable. That is what lets a thread-per-connection
// server time out slow or idle clients and stop without hanging (a plain blocking socket would
// wait forever in recv or send).

#include <sys/uio.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>
#include <cstddef>
#include <string_view>

struct ssl_st;      // OpenSSL's SSL
struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace tessera::gateway {

class PolledStream {
 public:
  using Clock = std::chrono::steady_clock;

  // Takes ownership of `fd` (made non-blocking here). `wake_fd` is polled alongside: once it is
  // readable every operation fails with operation_aborted.
  PolledStream(int fd, int wake_fd);
  ~PolledStream();
  PolledStream(const PolledStream&) = delete;
  PolledStream& operator=(const PolledStream&) = delete;

  int fd() const { return fd_; }
  bool tls() const { return ssl_ != nullptr; }

  // Makes this a TLS server connection with `ctx` (which must outlive the stream) and runs the
  // handshake, bounded by the deadline. False when it fails (not TLS, a timeout, a bad client);
  // the connection is then done. Every read and write after it goes through TLS.
  bool AcceptTls(ssl_ctx_st* ctx);
  int wake_fd() const { return wake_fd_; }

  // Operations fail with timed_out once this point has passed.
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  void expires_after(Clock::duration d) { deadline_ = Clock::now() + d; }
  void expires_never() { deadline_ = Clock::time_point::max(); }

  // Beast's SyncReadStream: eof when the peer closed.
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers, boost::beast::error_code& ec) {
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers); ++it) {
      boost::asio::mutable_buffer b = *it;
      if (b.size() > 0) return ReadSome(b.data(), b.size(), ec);
    }
    ec = {};
    return 0;
  }
  template <class MutableBufferSequence>
  std::size_t read_some(const MutableBufferSequence& buffers) {
    boost::beast::error_code ec;
    const std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  // Beast's SyncWriteStream.
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
    constexpr int kMaxIov = 16;
    iovec iov[kMaxIov];
    int count = 0;
    for (auto it = boost::asio::buffer_sequence_begin(buffers);
         it != boost::asio::buffer_sequence_end(buffers) && count < kMaxIov; ++it) {
      boost::asio::const_buffer b = *it;
      if (b.size() == 0) continue;
      iov[count].iov_base = const_cast<void*>(b.data());
      iov[count].iov_len = b.size();
      ++count;
    }
    if (count == 0) {
      ec = {};
      return 0;
    }
    return WriteSome(iov, count, ec);
  }
  template <class ConstBufferSequence>
  std::size_t write_some(const ConstBufferSequence& buffers) {
    boost::beast::error_code ec;
    const std::size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  // Writes all of `data`; false on any error (the error is in `ec`).
  bool WriteAll(std::string_view data, boost::beast::error_code& ec);

  // After answering a request whose body was not read: stops sending, then reads and drops what
  // the client still sends for a short while, so that it sees the answer rather than a reset.
  void LingeringClose();

 private:
  enum class Wait { kReady, kTimeout, kWake, kError };
  Wait WaitFor(short events);
  // Waits as OpenSSL asks after a call returned `result`; false (with `ec`) when it cannot go on.
  bool WaitForTls(int result, boost::beast::error_code& ec);
  boost::beast::error_code WaitError(Wait w) const;
  std::size_t ReadSome(void* data, std::size_t size, boost::beast::error_code& ec);
  std::size_t WriteSome(const iovec* iov, int count, boost::beast::error_code& ec);

  int fd_;
  int wake_fd_;
  Clock::time_point deadline_ = Clock::time_point::max();
  ssl_st* ssl_ = nullptr;
};

}  // namespace tessera::gateway
