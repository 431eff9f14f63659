#include "healthcheck/health_metrics.h"

#include <string>
#include <string_view>

#include "transport/metrics/labels.h"
#include "transport/metrics/must_register.h"

namespace tessera::health {

HealthMetrics::HealthMetrics(metrics::Registry& r)
    : sweeps_(metrics::MustRegister(r.AddCounter("tessera_health_sweeps_total",
                                                 "Sweeps finished, by trigger.", {"trigger"}))),
      condemned_(metrics::MustRegister(r.AddCounter(
          "tessera_health_nodes_condemned_total",
          "Nodes a sweep took out of service (cordoned, runs evicted), by verdict.", {"verdict"}))),
      deferred_(metrics::MustRegister(r.AddCounter(
          "tessera_health_verdicts_deferred_total",
          "Verdicts not acted on because other tenants' runs shared the node while it was "
          "measured (the node was drained, to be measured again once idle), by verdict.",
          {"verdict"}))),
      fabric_faults_(metrics::MustRegister(r.AddCounter(
          "tessera_health_fabric_faults_total",
          "Switches (or racks) a sweep named at fault, their nodes taken out together, by the "
          "label that names them.",
          {"label"}))),
      last_sweep_condemned_(
          &metrics::MustRegister(r.AddGauge("tessera_health_last_sweep_condemned_nodes",
                                            "Nodes the last finished sweep took out of service."))
               ->WithLabels()) {}

void HealthMetrics::SweepFinished(const v1::Sweep& sweep) {
  sweeps_
      ->WithLabels({metrics::EnumLabel(v1::SweepTrigger_Name(sweep.trigger()), "SWEEP_TRIGGER_")})
      .Increment();
  last_sweep_condemned_->Set(sweep.anomalous_nodes_size());
}

void HealthMetrics::Deferred(v1::HealthVerdict verdict) {
  deferred_->WithLabels({metrics::EnumLabel(v1::HealthVerdict_Name(verdict), "HEALTH_VERDICT_")})
      .Increment();
}

void HealthMetrics::FabricFault(const std::string& label) {
  fabric_faults_->WithLabels({label}).Increment();
}

void HealthMetrics::Condemned(v1::HealthVerdict verdict) {
  condemned_->WithLabels({metrics::EnumLabel(v1::HealthVerdict_Name(verdict), "HEALTH_VERDICT_")})
      .Increment();
}

}  // namespace tessera::health
