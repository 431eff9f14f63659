#pragma once
// The health API's settings, shared by its roles (health.h).

#include "absl/time/time.h"
#include "healthcheck/anomaly.h"
#include "healthcheck/sweep_plan.h"
#include "healthcheck/sweep_triggers.h"

namespace tessera::health {

struct HealthConfig {
  CanaryConfig canary;
  AnomalyConfig anomaly;
  // Sweeps on a schedule, from the run watch, and of drained nodes; the idle peers a suspect is
  // measured beside.
  SweepTriggerConfig triggers;
  // A node the health API cordoned returns after this many passing sweeps in a row; 0: never
  // (an operator uncordons it).
  int uncordon_after_passes = 0;
  // The all-reduce canaries' rendezvous ports are drawn from [port_base, port_base + port_span).
  // Below 1024 (net.ipv4.ip_unprivileged_port_start): only a privileged process, as the worker
  // and its canaries are and a run's ranks never are, can bind them, so no run can hold a port
  // a sweep needs and fail its node's canaries. The worker warns where the node lets anyone
  // bind them.
  int port_base = 700;
  int port_span = 300;
  absl::Duration dispatch_timeout = absl::Seconds(5);
};

}  // namespace tessera::health
