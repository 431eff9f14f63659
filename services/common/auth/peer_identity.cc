#include "services/common/auth/peer_identity.h"

#include <grpc/grpc_security_constants.h>

#include "absl/strings/str_cat.h"

namespace tessera::auth {

PeerIdentity PeerOf(const grpc::ServerContextBase& context) {
  PeerIdentity peer;
  const auto auth = context.auth_context();
  if (auth == nullptr) return peer;
  for (const auto& type : auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME)) {
    // "ssl" from SslServerCredentials, "tls" from the TlsServerCredentials Tessera serves with.
    const std::string name(type.data(), type.size());
    if (name == GRPC_SSL_TRANSPORT_SECURITY_TYPE || name == GRPC_TLS_TRANSPORT_SECURITY_TYPE) {
      peer.tls = true;
    }
  }
  for (const auto& cn : auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
    peer.common_name = std::string(cn.data(), cn.size());
  }
  return peer;
}

absl::Status CheckPeerIdentity(const PeerIdentity& peer, const Principal& who) {
  if (!peer.tls) return absl::OkStatus();
  if (who.is_node() && peer.common_name != NodeCommonName(who.node)) {
    return absl::PermissionDeniedError(
        absl::StrCat("the node key of ", who.node,
                     " is accepted only with the client certificate of ", NodeCommonName(who.node),
                     peer.common_name.empty() ? std::string(" (none was shown)")
                                              : absl::StrCat(" (shown: ", peer.common_name, ")")));
  }
  if (who.is_system() && peer.common_name != kServicesCommonName) {
    return absl::PermissionDeniedError(
        absl::StrCat("a system key is accepted only with the services' client certificate (CN ",
                     kServicesCommonName, ")"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::auth
