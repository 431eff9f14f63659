#pragma once
// How a node gets its credentials. A worker sends a join token (made by an admin for its node,
// used once, expiring), its node name and a certificate signing request for a key pair it made;
// it receives a node key bound to that node and, when the control plane holds the cluster CA's
// key, a client certificate "CN=node:NAME" signed by it. The node's private key never leaves the
// node. Before the certificate expires, the node renews it with its key and current certificate.

#include <memory>

#include "absl/status/status.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/store/api_key_store.h"
#include "services/store/join_token_store.h"
#include "tessera/v1/admin.pb.h"
#include "transport/tls/certificate_authority.h"

namespace tessera::admin {

struct JoinOptions {
  // How long a node certificate is valid; a worker renews it when a third is left.
  absl::Duration certificate_validity = absl::Hours(30 * 24);
};

class JoinHandler {
 public:
  // `ca` is null when the control plane does not hold the CA's key: nodes then get a key only,
  // and their certificates from the operator.
  JoinHandler(std::shared_ptr<store::JoinTokenStore> tokens,
              std::shared_ptr<const tls::CertificateAuthority> ca, std::shared_ptr<Clock> clock,
              JoinOptions options = {});

  // No caller: the token is the credential. UNAUTHENTICATED for an unknown token,
  // PERMISSION_DENIED naming why a known one cannot be used, INVALID_ARGUMENT for a bad node
  // name or request (checked before the token is used, so a bad request does not spend it).
  absl::Status Join(const v1::JoinRequest& req, v1::JoinResponse* resp);

  // A node key renews its own node's certificate (never another node's).
  absl::Status RenewNodeCertificate(const auth::Principal& who,
                                    const v1::RenewNodeCertificateRequest& req,
                                    v1::RenewNodeCertificateResponse* resp);

  bool signs_certificates() const { return ca_ != nullptr; }

 private:
  std::shared_ptr<store::JoinTokenStore> tokens_;
  std::shared_ptr<const tls::CertificateAuthority> ca_;
  std::shared_ptr<Clock> clock_;
  JoinOptions options_;
};

}  // namespace tessera::admin
