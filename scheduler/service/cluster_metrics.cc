#include "scheduler/service/cluster_metrics.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>

#include "base/timestamps.h"
#include "transport/metrics/labels.h"
#include "transport/metrics/must_register.h"

namespace tessera::scheduler {
namespace {

std::string StatusName(v1::RunStatus status) {
  return metrics::EnumLabel(v1::RunStatus_Name(status), "RUN_STATUS_");
}

std::string NodeState(const v1::Node& node) {
  if (node.liveness() == v1::NODE_LIVENESS_LOST) return "lost";
  if (node.health() == v1::NODE_HEALTH_UNHEALTHY) return "unhealthy";
  if (node.admin_state() == v1::NODE_ADMIN_STATE_DRAINING) return "draining";
  if (node.admin_state() == v1::NODE_ADMIN_STATE_CORDONED) return "cordoned";
  return "ready";
}

// Seconds, from a tenth of a second to a day.
std::vector<double> WaitBuckets() {
  return {0.1, 0.5, 1, 5, 15, 60, 300, 900, 1800, 3600, 4 * 3600.0, 12 * 3600.0, 86400};
}

}  // namespace

ClusterSummary SummarizeCluster(const std::vector<v1::Run>& runs,
                                const std::vector<v1::Node>& nodes, absl::Time now) {
  ClusterSummary s;
  std::map<std::string, int64_t> held;  // GPUs held by attempts, by node name
  for (const auto& run : runs) {
    ++s.runs_by_status[StatusName(run.status())];
    if (run.status() == v1::RUN_STATUS_QUEUED && run.has_updated_at()) {
      s.oldest_queued_seconds = std::max(
          s.oldest_queued_seconds, absl::ToDoubleSeconds(now - FromProtoTime(run.updated_at())));
    }
    if (run.status() != v1::RUN_STATUS_STARTING && run.status() != v1::RUN_STATUS_RUNNING &&
        run.status() != v1::RUN_STATUS_TERMINATING) {
      continue;
    }
    for (const auto& n : run.nodes()) held[n.node_name()] += n.gpu_indices_size();
  }
  for (const auto& node : nodes) {
    const std::string state = NodeState(node);
    ++s.nodes[{node.cluster(), state}];
    const int64_t total = node.gpu_count();
    const auto it = held.find(node.name());
    const int64_t allocated = std::min<int64_t>(total, it == held.end() ? 0 : it->second);
    auto& gpus = s.gpus;
    if (state == "lost") {
      gpus[{node.cluster(), node.gpu_type(), "lost"}] += total;
      continue;
    }
    gpus[{node.cluster(), node.gpu_type(), "allocated"}] += allocated;
    gpus[{node.cluster(), node.gpu_type(), state == "ready" ? "free" : "cordoned"}] +=
        total - allocated;
  }
  return s;
}

SchedulerMetrics::SchedulerMetrics(metrics::Registry& r)
    : runs_(metrics::MustRegister(r.AddGauge(
          "tessera_runs", "Runs not yet ended, by status (the leader's view).", {"status"}))),
      gpus_(metrics::MustRegister(
          r.AddGauge("tessera_gpus",
                     "GPUs by cluster, GPU type and state: allocated, free, cordoned "
                     "(on a cordoned, draining or unhealthy node), lost.",
                     {"cluster", "gpu_type", "state"}))),
      nodes_(metrics::MustRegister(
          r.AddGauge("tessera_nodes_by_state",
                     "Nodes by cluster and state: ready, cordoned, draining, unhealthy, "
                     "lost.",
                     {"cluster", "state"}))),
      oldest_queued_(&metrics::MustRegister(
                          r.AddGauge("tessera_queue_oldest_wait_seconds",
                                     "Seconds the longest-waiting queued run has waited since "
                                     "its last change (0: the queue is empty)."))
                          ->WithLabels()),
      placements_(&metrics::MustRegister(r.AddCounter("tessera_scheduler_placements_total",
                                                      "Attempts placed on nodes and started."))
                       ->WithLabels()),
      preemptions_(&metrics::MustRegister(
                        r.AddCounter("tessera_scheduler_preemptions_total",
                                     "Attempts stopped to make room for a higher priority."))
                        ->WithLabels()),
      lease_expiries_(
          &metrics::MustRegister(r.AddCounter("tessera_node_lease_expiries_total",
                                              "Nodes declared lost: their lease expired."))
               ->WithLabels()),
      suspected_(&metrics::MustRegister(
                      r.AddGauge("tessera_nodes_suspected",
                                 "Nodes that missed a heartbeat and are not yet lost: nothing new "
                                 "is placed on them."))
                      ->WithLabels()),
      preflight_failures_(metrics::MustRegister(
          r.AddCounter("tessera_preflight_failures_total",
                       "Pre-flight checks that failed on a node before an attempt could start "
                       "(the node was cordoned), by check.",
                       {"check"}))),
      queue_wait_(&metrics::MustRegister(
                       r.AddHistogram("tessera_queue_wait_seconds",
                                      "Seconds a run waited in the queue before it was placed "
                                      "(since its last change).",
                                      {}, WaitBuckets()))
                       ->WithLabels()),
      cycle_seconds_(
          &metrics::MustRegister(r.AddHistogram("tessera_scheduler_cycle_seconds",
                                                "Seconds a scheduling cycle of the leader took.",
                                                {}, {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5}))
               ->WithLabels()) {}

void SchedulerMetrics::PreflightFailed(
    const google::protobuf::RepeatedPtrField<v1::PreflightCheck>& checks) {
  for (const auto& c : checks) {
    if (!c.passed()) preflight_failures_->WithLabels({c.name()}).Increment();
  }
}

void SchedulerMetrics::Publish(const ClusterSummary& summary) {
  for (const auto& [status, n] : published_.runs_by_status) {
    if (!summary.runs_by_status.count(status)) runs_->WithLabels({status}).Set(0);
  }
  for (const auto& [status, n] : summary.runs_by_status) {
    runs_->WithLabels({status}).Set(static_cast<double>(n));
  }
  for (const auto& [key, n] : published_.gpus) {
    if (!summary.gpus.count(key)) gpus_->WithLabels({key[0], key[1], key[2]}).Set(0);
  }
  for (const auto& [key, n] : summary.gpus) {
    gpus_->WithLabels({key[0], key[1], key[2]}).Set(static_cast<double>(n));
  }
  for (const auto& [key, n] : published_.nodes) {
    if (!summary.nodes.count(key)) nodes_->WithLabels({key[0], key[1]}).Set(0);
  }
  for (const auto& [key, n] : summary.nodes) {
    nodes_->WithLabels({key[0], key[1]}).Set(static_cast<double>(n));
  }
  oldest_queued_->Set(summary.oldest_queued_seconds);
  published_ = summary;
}

void SchedulerMetrics::Placed(absl::Duration waited) {
  placements_->Increment();
  queue_wait_->Observe(std::max(0.0, absl::ToDoubleSeconds(waited)));
}

}  // namespace tessera::scheduler
