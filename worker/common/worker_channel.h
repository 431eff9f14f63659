#pragma once
// The worker's channels to the control plane. A lease is seconds long, so a worker must
// reconnect within a second of a restarted or reachable-again service, not after gRPC's default
// backoff of up to two minutes. Over TLS the worker shows its node certificate (mutual TLS). No
// transport keepalive: servers answer frequent pings with GOAWAY, and a silent peer is detected by
// the lease instead (see ControlSession::FenceLoop).

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "transport/grpc_limits.h"
#include "transport/tls/grpc_credentials.h"

namespace tessera::worker {

inline std::shared_ptr<grpc::Channel> WorkerChannel(const std::string& endpoint,
                                                    const tls::TlsFlags& tls) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  ApplyTransportSettings(args);
  return grpc::CreateCustomChannel(endpoint, tls::ChannelCredentials(tls), args);
}

}  // namespace tessera::worker
