// tessera-health: the health API (sweeps, anomaly detection, remediation), as its own process.
#include "server/serve.h"

int main(int argc, char** argv) {
  return tessera::server::ServeMain(
      {"tessera-health", "tessera-health: canary sweeps, GPU faults, hangs and remediation", false,
       false, false, false, true},
      argc, argv);
}
