#include "services/common/auth/peer_identity.h"

#include <grpc/grpc_security_constants.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/common/auth/service_caller.h"
#include "transport/client_address.h"

namespace tessera::auth {

PeerIdentity PeerOf(const grpc::ServerContextBase& context) {
  PeerIdentity peer;
  peer.relayed = context.client_metadata().count(kClientAddressMetadata) > 0;
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
  if (peer.relayed && (who.is_node() || who.is_system())) {
    return absl::PermissionDeniedError(absl::StrCat(
        "a ", who.is_node() ? "node" : "system", " key is not accepted through the REST gateway: ",
        who.is_node() ? "a worker calls the control plane's gRPC services directly"
                      : "Tessera's services call each other directly",
        ", with their certificate"));
  }
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

std::string HostOfPeer(const std::string& peer) {
  absl::string_view p = peer;
  if (absl::StartsWith(p, "unix:")) return std::string(p);
  absl::ConsumePrefix(&p, "ipv4:") || absl::ConsumePrefix(&p, "ipv6:");
  absl::ConsumePrefix(&p, "%5B");  // gRPC writes "ipv6:%5B::1%5D:port"
  if (absl::ConsumePrefix(&p, "[")) return std::string(p.substr(0, p.find(']')));
  if (const size_t bracket = p.find("%5D"); bracket != absl::string_view::npos) {
    return std::string(p.substr(0, bracket));
  }
  if (std::count(p.begin(), p.end(), ':') == 1) p = p.substr(0, p.find(':'));
  return std::string(p);
}

bool ForAPerson(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  return metadata.find(kClientAddressMetadata) != metadata.end() ||
         metadata.find(kUserTrafficMetadata) != metadata.end();
}

bool InProcess(const grpc::ServerContextBase& context) {
  const std::string peer = context.peer();
  return !absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:") &&
         !absl::StartsWith(peer, "unix:");
}

bool FromTesseraService(const grpc::ServerContextBase& context) {
  if (InProcess(context)) return true;
  const PeerIdentity identity = PeerOf(context);
  return identity.tls && identity.common_name == kServicesCommonName;
}

std::string RelayedClientAddress(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kClientAddressMetadata);
  if (it == metadata.end() || !FromTesseraService(context)) return "";
  return std::string(it->second.data(), std::min<size_t>(it->second.size(), 128));
}

CallOrigin OriginOf(const grpc::ServerContextBase& context) {
  const PeerIdentity identity = PeerOf(context);
  // A node showing its certificate is part of the control plane too (its heartbeats are).
  const bool node = identity.tls && absl::StartsWith(identity.common_name, NodeCommonName(""));
  CallOrigin origin;
  origin.control_plane = (FromTesseraService(context) || node) && !ForAPerson(context);
  const std::string relayed = RelayedClientAddress(context);
  origin.address = !relayed.empty()     ? HostOfPeer(relayed)
                   : InProcess(context) ? "in-process"
                                        : HostOfPeer(context.peer());
  return origin;
}

}  // namespace tessera::auth
