#include "transport/tls/grpc_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <map>
#include <tuple>

#include "absl/synchronization/mutex.h"

namespace tessera::tls {
namespace {

using grpc::experimental::FileWatcherCertificateProvider;

// How often certificate files are read again. A server's renewed certificate must be served
// soon (operators renew it in place); a client's is renewed long before it expires, and every
// read of the files costs an idle node about a millisecond.
constexpr unsigned kServerRefreshSeconds = 2;
constexpr unsigned kClientRefreshSeconds = 10;

// One watcher per set of files and refresh interval in a process: each watcher is a thread that
// reads its files.
std::shared_ptr<FileWatcherCertificateProvider> Provider(const TlsFlags& flags,
                                                         unsigned refresh_seconds) {
  static absl::Mutex mu;
  static auto* providers = new std::map<std::tuple<std::string, std::string, std::string, unsigned>,
                                        std::shared_ptr<FileWatcherCertificateProvider>>();
  absl::MutexLock lock(&mu);
  auto& p = (*providers)[{flags.key_file, flags.cert_file, flags.ca_file, refresh_seconds}];
  if (p == nullptr) {
    p = std::make_shared<FileWatcherCertificateProvider>(flags.key_file, flags.cert_file,
                                                         flags.ca_file, refresh_seconds);
  }
  return p;
}

}  // namespace

std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsFlags& flags) {
  if (flags.plaintext) return grpc::InsecureServerCredentials();
  grpc::experimental::TlsServerCredentialsOptions options(Provider(flags, kServerRefreshSeconds));
  options.watch_identity_key_cert_pairs();
  options.watch_root_certs();
  options.set_cert_request_type(GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsFlags& flags) {
  if (flags.plaintext) return grpc::InsecureChannelCredentials();
  if (flags.ca_file.empty() && flags.cert_file.empty()) {
    return grpc::SslCredentials(grpc::SslCredentialsOptions());
  }
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(Provider(flags, kClientRefreshSeconds));
  if (!flags.ca_file.empty()) options.watch_root_certs();
  if (!flags.cert_file.empty()) options.watch_identity_key_cert_pairs();
  options.set_verify_server_certs(true);
  return grpc::experimental::TlsCredentials(options);
}

}  // namespace tessera::tls
