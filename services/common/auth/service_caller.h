#pragma once
// Whether a call comes from one of Tessera's own services, and what it says it relays: the
// decision OriginOf (peer_identity.h) and the audit log's source of a call (audit_log.h) share.
// Kept out of peer_identity.h, which most of the code includes.

#include <grpcpp/server_context.h>

#include <string>

namespace tessera::auth {

// Whether the peer is not a network connection (the in-process channel).
bool InProcess(const grpc::ServerContextBase& context);

// The in-process channel, or a connection showing the services' certificate (CN
// kServicesCommonName) over mutual TLS.
bool FromTesseraService(const grpc::ServerContextBase& context);

// The REST gateway's client's address (its first 128 bytes), believed only from one of
// Tessera's services; empty when the call relays none or comes from anyone else.
std::string RelayedClientAddress(const grpc::ServerContextBase& context);

}  // namespace tessera::auth
