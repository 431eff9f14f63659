#pragma once
// The TLS context of an HTTP listener (the REST gateway, /metrics): the certificate and key of
// TlsFlags, loaded again when either file changes, so a renewed certificate is served to new
// connections without a restart.

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "transport/tls/tls_flags.h"

namespace tessera::tls {

class ServerSslContext {
 public:
  // Loads the files once; INVALID_ARGUMENT naming the file when they do not load.
  static absl::StatusOr<std::shared_ptr<ServerSslContext>> Create(const TlsFlags& flags);
  // The context an HTTP listener serves with: Create's, or null for --plaintext (plain HTTP).
  static absl::StatusOr<std::shared_ptr<ServerSslContext>> ForListener(const TlsFlags& flags);

  // The context for a new connection. The files are looked at (stat) at most once a second; a
  // changed pair that does not load (a half-written file) keeps the last good context.
  std::shared_ptr<boost::asio::ssl::context> Current();

 private:
  struct Stamp {
    std::int64_t cert_mtime_ns = 0, key_mtime_ns = 0, cert_size = 0, key_size = 0;
    bool operator==(const Stamp&) const = default;
  };
  explicit ServerSslContext(TlsFlags flags) : flags_(std::move(flags)) {}
  Stamp Look() const;
  absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> Load() const;

  const TlsFlags flags_;
  absl::Mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;
  Stamp stamp_;
  std::chrono::steady_clock::time_point next_look_;
};

}  // namespace tessera::tls
