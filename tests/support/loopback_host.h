#pragma once
// A unit test's real gRPC server: services on 127.0.0.1 (a port the system picks), in plain text,
// logging warnings only, and a channel to it. Header-only: link tessera_service_host.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "transport/service_host.h"

namespace tessera::testing {

// Serves `services` (which must outlive the host); fails the test if it cannot.
inline std::unique_ptr<ServiceHost> ServeOnLoopback(const std::vector<grpc::Service*>& services) {
  HostOptions options;
  options.grpc_listen = "127.0.0.1:0";
  options.metrics_listen = "127.0.0.1:0";
  options.log_level = "warn";
  options.tls.plaintext = true;
  auto started = ServiceHost::Start(options, services);
  if (!started.ok()) throw std::runtime_error(std::string(started.status().message()));
  return *std::move(started);
}

inline std::shared_ptr<grpc::Channel> LoopbackChannel(const ServiceHost& host) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", host.grpc_port()),
                             grpc::InsecureChannelCredentials());
}

}  // namespace tessera::testing
