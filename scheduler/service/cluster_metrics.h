#pragma once
// What the scheduler's leader tells Prometheus about the cluster. After each cycle: runs by
// status (those not ended), the queue and its oldest run's wait, GPUs and nodes by state per
// cluster. As they happen: placements, preemptions, nodes whose lease expired, pre-flight checks
// that failed (by check), and how long each run waited in the queue before it was placed. Label
// sets stay bounded: statuses, clusters, GPU types and fixed state names, check names (the built-in
// ones and the operator's scripts), never run or node names.

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "tessera/v1/health.pb.h"
#include "tessera/v1/nodes.pb.h"
#include "tessera/v1/runs.pb.h"
#include "transport/metrics/registry.h"

namespace tessera::scheduler {

struct ClusterSummary {
  // By status name ("QUEUED"), over the runs the cycle read (none has ended).
  std::map<std::string, int64_t> runs_by_status;
  // (cluster, gpu_type, state) -> GPUs. States: "allocated" (held by an attempt), "free"
  // (placeable now), "cordoned" (on a cordoned, draining or unhealthy node, not held), "lost"
  // (on a node whose lease expired).
  std::map<std::array<std::string, 3>, int64_t> gpus;
  // (cluster, state) -> nodes. States: "ready", "cordoned", "draining", "unhealthy", "lost" (the
  // first that applies, from the last).
  std::map<std::array<std::string, 2>, int64_t> nodes;
  // Seconds since the longest-waiting queued run last changed (0: none waits).
  double oldest_queued_seconds = 0;
};

ClusterSummary SummarizeCluster(const std::vector<v1::Run>& runs,
                                const std::vector<v1::Node>& nodes, absl::Time now);

class SchedulerMetrics {
 public:
  // Registers its families in `registry` (which outlives it).
  explicit SchedulerMetrics(metrics::Registry& registry);

  // Sets the gauges to `summary`; series of an earlier summary that it lacks go to 0.
  void Publish(const ClusterSummary& summary);
  void Placed(absl::Duration waited);
  void Preempted() { preemptions_->Increment(); }
  void LeaseExpired() { lease_expiries_->Increment(); }
  // Nodes that missed a heartbeat and are not yet lost, as this cycle found them.
  void Suspected(size_t nodes) { suspected_->Set(static_cast<double>(nodes)); }
  // One count per failed check of a node's pre-flight report.
  void PreflightFailed(const google::protobuf::RepeatedPtrField<v1::PreflightCheck>& checks);
  void CycleTook(absl::Duration took) { cycle_seconds_->Observe(absl::ToDoubleSeconds(took)); }

 private:
  metrics::Family<metrics::Gauge>* runs_;
  metrics::Family<metrics::Gauge>* gpus_;
  metrics::Family<metrics::Gauge>* nodes_;
  metrics::Gauge* oldest_queued_;
  metrics::Counter* placements_;
  metrics::Counter* preemptions_;
  metrics::Counter* lease_expiries_;
  metrics::Gauge* suspected_;
  metrics::Family<metrics::Counter>* preflight_failures_;
  metrics::Histogram* queue_wait_;
  metrics::Histogram* cycle_seconds_;
  ClusterSummary published_;
};

}  // namespace tessera::scheduler
