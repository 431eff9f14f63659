#pragma once
// Mutual TLS binds a machine credential to a key: over TLS, a node key is accepted only from a
// connection showing that node's client certificate (CN "node:NAME", signed by the cluster CA),
// and a system key only from one showing the services' certificate. A key copied off a node is
// then useless anywhere else. People's keys need no certificate. Plain-text connections
// (loopback only, see tls_flags.h) and the in-process channel are not checked.

#include <grpcpp/server_context.h>

#include <string>

#include "absl/status/status.h"
#include "services/common/auth/principal.h"

namespace tessera::auth {

inline constexpr char kServicesCommonName[] = "tessera-services";

// The common name a node's client certificate carries.
inline std::string NodeCommonName(const std::string& node) { return "node:" + node; }

struct PeerIdentity {
  bool tls = false;
  // The CN of the client certificate gRPC verified against the CA; empty when none was shown.
  std::string common_name;
};

PeerIdentity PeerOf(const grpc::ServerContextBase& context);

// PERMISSION_DENIED when a node or system principal calls over TLS without its certificate.
absl::Status CheckPeerIdentity(const PeerIdentity& peer, const Principal& who);

}  // namespace tessera::auth
