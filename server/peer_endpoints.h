#pragma once
// Where a control-plane binary reaches the services it does not host itself
// (--scheduler-endpoint, --runs-endpoint, ...): which flags a binary has follows from the parts
// it hosts (tessera-server hosts all and has none).

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/serve.h"
#include "transport/tls/tls_flags.h"

namespace tessera::server {

struct PeerEndpoints {
  std::string runs, scheduler, logs, cordon, health;

  // Each endpoint with its flag, for the TLS check (empty ones too: it skips them).
  std::vector<tls::NamedAddress> Named() const;
};

void AddPeerEndpointFlags(CLI::App& app, const Parts& parts, PeerEndpoints& e);

// INVALID_ARGUMENT naming the flag of an endpoint that is not a gRPC target (host:port, or a
// comma-separated list of them where a leader is looked for).
absl::Status CheckPeerEndpoints(const PeerEndpoints& e);

}  // namespace tessera::server
