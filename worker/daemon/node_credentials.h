#pragma once
// A worker's credentials: the node key it calls the control plane with, and (over TLS) the
// client certificate "CN=node:NAME" that goes with it. They come either from the operator
// (--api-key-file, --tls-cert/--tls-key) or from joining: the worker makes a key pair, sends a
// certificate signing request with a one-time join token (--join-token-file) and keeps what it
// gets in its credentials folder (mode 0700; the key files 0600), where a restart finds them.
// Before the certificate expires, NodeCertificateRenewal renews it with a new key pair.

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "transport/periodic_runner.h"
#include "transport/tls/tls_flags.h"

namespace tessera::worker {

// The files of a joined node in `dir`.
struct CredentialFiles {
  std::string api_key;      // dir/node-api.key: the node key's secret
  std::string certificate;  // dir/node.pem: the node's certificate (absent without a CA)
  std::string private_key;  // dir/node.key: its private key
  static CredentialFiles In(const std::string& dir);
};

struct JoinOptions {
  std::string node;
  // host:port (or a list) of the control plane's NodeJoin API (the run manager).
  std::string endpoint;
  std::string token_file;
  std::string credentials_dir;
  // The cluster CA, which the control plane's certificate must chain to; or plain text.
  tls::TlsFlags tls;
  absl::Duration timeout = absl::Seconds(30);
};

// Joins unless `credentials_dir` already holds a node key (a restart of a joined worker).
// Returns the files; INVALID_ARGUMENT / the server's error naming what went wrong (an unusable
// token keeps its reason: used, expired, revoked, another node's).
absl::StatusOr<CredentialFiles> JoinIfNeeded(const JoinOptions& options);

// Renews the certificate in `files` once a third of its validity is left: a new key pair, its
// request signed by the control plane over the node's current mutual-TLS identity, both files
// replaced (gRPC and the HTTPS listener pick them up by themselves). Checks at start and then
// every `check_every`.
class NodeCertificateRenewal {
 public:
  NodeCertificateRenewal(CredentialFiles files, std::string endpoint, std::string api_key,
                         tls::TlsFlags tls, std::shared_ptr<Clock> clock,
                         absl::Duration check_every = absl::Minutes(10));

  // One check: renews when due. OK when nothing was due.
  absl::Status CheckOnce();

 private:
  void Check();
  CredentialFiles files_;
  std::string endpoint_;
  std::string api_key_;
  tls::TlsFlags tls_;
  std::shared_ptr<Clock> clock_;
  absl::Duration check_every_;
  PeriodicRunner runner_;  // last: it calls Check as soon as it is built
};

}  // namespace tessera::worker
