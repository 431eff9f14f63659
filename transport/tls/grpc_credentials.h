#pragma once
// gRPC credentials from TlsFlags. Certificates are read by gRPC's file watcher, so a renewed
// certificate, key or CA is picked up within seconds, without a restart.

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "transport/tls/tls_flags.h"

namespace tessera::tls {

// For a listener: serves `flags`' certificate; a client that shows a certificate must chain it
// to the CA (mutual TLS for workers and services), one that shows none may still call with an
// API key (people). Insecure with --plaintext. `flags` must have passed CheckTlsFlags.
std::shared_ptr<grpc::ServerCredentials> ServerCredentials(const TlsFlags& flags);

// For a channel: verifies the server's certificate (chain to the CA, name of the target) and
// shows this process's certificate when it has one. With no CA file the system's roots are
// used (mcli against a public endpoint). Insecure with --plaintext.
std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const TlsFlags& flags);

}  // namespace tessera::tls
