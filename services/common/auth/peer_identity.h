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
  // The call relays an HTTP client's request (the REST gateway names its client's address).
  bool relayed = false;
};

PeerIdentity PeerOf(const grpc::ServerContextBase& context);

// Where a call comes from, decided before its key is looked up.
struct CallOrigin {
  // One of Tessera's own services (the in-process channel or the services' certificate) or a
  // node (its certificate) calling for itself, not relaying a person's request (the gateway's
  // client address or the user-traffic mark, client_address.h). Its key lookups are control
  // traffic and unlimited.
  bool control_plane = false;
  // What limits per address count by: the REST gateway's client's host (believed only from the
  // gateway), else the peer's host without its port ("in-process" for the in-process channel).
  std::string address;
};
CallOrigin OriginOf(const grpc::ServerContextBase& context);

// Whether the call relays or serves a person's request (either metadata of client_address.h):
// a system caller's such call is user traffic. Believing anyone is safe: only system callers
// could gain from saying otherwise, and they can only say it is a person's.
bool ForAPerson(const grpc::ServerContextBase& context);

// "1.2.3.4" of "ipv4:1.2.3.4:5678", "1.2.3.4:5678"; "::1" of "ipv6:[::1]:5678".
std::string HostOfPeer(const std::string& peer);

// PERMISSION_DENIED when a node or system principal calls over TLS without its certificate, or
// through the REST gateway at all: machines call the services directly, so a machine's key in an
// HTTP client's hands is refused whatever certificate the gateway shows.
absl::Status CheckPeerIdentity(const PeerIdentity& peer, const Principal& who);

}  // namespace tessera::auth
