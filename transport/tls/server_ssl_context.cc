#include "transport/tls/server_ssl_context.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace tessera::tls {
namespace {

namespace ssl = boost::asio::ssl;

void StampOf(const std::string& path, std::int64_t& mtime_ns, std::int64_t& size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;
  mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  size = static_cast<std::int64_t>(st.st_size);
}

}  // namespace

absl::StatusOr<std::shared_ptr<ServerSslContext>> ServerSslContext::Create(const TlsFlags& flags) {
  std::shared_ptr<ServerSslContext> out(new ServerSslContext(flags));
  out->stamp_ = out->Look();
  auto loaded = out->Load();
  if (!loaded.ok()) return loaded.status();
  out->current_ = *std::move(loaded);
  out->next_look_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  return out;
}

absl::StatusOr<std::shared_ptr<ServerSslContext>> ServerSslContext::ForListener(
    const TlsFlags& flags) {
  if (flags.plaintext) return std::shared_ptr<ServerSslContext>();
  return Create(flags);
}

ServerSslContext::Stamp ServerSslContext::Look() const {
  Stamp s;
  StampOf(flags_.cert_file, s.cert_mtime_ns, s.cert_size);
  StampOf(flags_.key_file, s.key_mtime_ns, s.key_size);
  return s;
}

absl::StatusOr<std::shared_ptr<ssl::context>> ServerSslContext::Load() const {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(flags_.cert_file, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-cert: ", flags_.cert_file, ": cannot be loaded: ", ec.message()));
  }
  ctx->use_private_key_file(flags_.key_file, ssl::context::pem, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-key: ", flags_.key_file, ": cannot be loaded: ", ec.message()));
  }
  return ctx;
}

std::shared_ptr<ssl::context> ServerSslContext::Current() {
  absl::MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now < next_look_) return current_;
  next_look_ = now + std::chrono::seconds(1);
  const Stamp seen = Look();
  if (seen == stamp_) return current_;
  auto loaded = Load();
  if (!loaded.ok()) {
    // Probably caught between writing the certificate and the key: try again next time.
    spdlog::warn("TLS: keeping the previous certificate: {}",
                 std::string(loaded.status().message()));
    return current_;
  }
  stamp_ = seen;
  current_ = *std::move(loaded);
  spdlog::info("TLS: loaded the renewed certificate {}", flags_.cert_file);
  return current_;
}

}  // namespace tessera::tls
