#include "server/peer_endpoints.h"

#include "transport/endpoints.h"

namespace tessera::server {

std::vector<tls::NamedAddress> PeerEndpoints::Named() const {
  return {{"--runs-endpoint", runs},
          {"--scheduler-endpoint", scheduler},
          {"--logs-endpoint", logs},
          {"--cordon-endpoint", cordon},
          {"--health-endpoint", health}};
}

void AddPeerEndpointFlags(CLI::App& app, const Parts& parts, PeerEndpoints& e) {
  if ((parts.runs || parts.health) && !parts.scheduler) {
    app.add_option("--scheduler-endpoint", e.scheduler, "host:port of tessera-scheduler")
        ->required();
  }
  if ((parts.scheduler || parts.logs || parts.health) && !parts.runs) {
    app.add_option("--runs-endpoint", e.runs, "host:port of tessera-runs")->required();
  }
  if (parts.health && !parts.cordon) {
    app.add_option("--cordon-endpoint", e.cordon, "host:port of tessera-cordon")->required();
  }
  if (parts.scheduler && !parts.health) {
    app.add_option("--health-endpoint", e.health,
                   "host:port of tessera-health, for GPU faults, hangs and canary results "
                   "(empty: none; hung and faulty runs are still evicted)");
  }
  if (parts.runs && !parts.logs) {
    app.add_option("--logs-endpoint", e.logs,
                   "host:port of tessera-logs, to delete the logs of deleted runs (empty: none)");
  }
}

absl::Status CheckPeerEndpoints(const PeerEndpoints& e) {
  for (const auto& [flag, value] : e.Named()) {
    if (value.empty()) continue;
    if (auto target = GrpcTarget(flag, value); !target.ok()) return target.status();
  }
  return absl::OkStatus();
}

}  // namespace tessera::server
