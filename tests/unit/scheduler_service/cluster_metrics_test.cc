// The leader's cluster metrics: what SummarizeCluster counts, what Publish exports (and zeroes),
// and what a scheduler's cycles report as runs are placed and nodes lost.
#include "scheduler/service/cluster_metrics.h"

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/timestamps.h"
#include "tests/support/metric_values.h"
#include "tests/unit/scheduler_service/scheduler_fixture.h"
#include "transport/metrics/registry.h"

namespace tessera::scheduler {
namespace cluster_metrics_test {

const absl::Time kNow = absl::FromUnixSeconds(1'700'000'000);

v1::Node Node(const std::string& name, const std::string& cluster, int gpus) {
  v1::Node n;
  n.set_name(name);
  n.set_cluster(cluster);
  n.set_gpu_type("h100");
  n.set_gpu_count(gpus);
  n.set_liveness(v1::NODE_LIVENESS_ONLINE);
  n.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
  n.set_health(v1::NODE_HEALTH_HEALTHY);
  return n;
}

v1::Run Run(v1::RunStatus status, const std::string& node = "", int gpus = 0) {
  v1::Run r;
  r.set_status(status);
  if (!node.empty()) {
    auto* n = r.add_nodes();
    n->set_node_name(node);
    for (int i = 0; i < gpus; ++i) n->add_gpu_indices(i);
  }
  return r;
}

std::optional<double> Value(const metrics::Registry& r, const std::string& name,
                            const std::vector<std::string>& labels = {}) {
  return testing::MetricValue(r, name, labels);
}

TEST_CASE("the summary counts runs by status and GPUs and nodes by state") {
  std::vector<v1::Node> nodes = {Node("a", "c1", 8), Node("b", "c1", 8), Node("c", "c1", 8),
                                 Node("d", "c2", 4), Node("e", "c1", 8)};
  nodes[1].set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  nodes[2].set_liveness(v1::NODE_LIVENESS_LOST);
  nodes[4].set_health(v1::NODE_HEALTH_UNHEALTHY);
  v1::Run queued = Run(v1::RUN_STATUS_QUEUED);
  *queued.mutable_updated_at() = ToProtoTime(kNow - absl::Minutes(90));
  v1::Run newer = Run(v1::RUN_STATUS_QUEUED);
  *newer.mutable_updated_at() = ToProtoTime(kNow - absl::Minutes(5));
  const std::vector<v1::Run> runs = {Run(v1::RUN_STATUS_RUNNING, "a", 6),
                                     Run(v1::RUN_STATUS_TERMINATING, "b", 2),
                                     Run(v1::RUN_STATUS_PENDING),
                                     queued,
                                     newer,
                                     Run(v1::RUN_STATUS_STARTING, "d", 4)};
  const ClusterSummary s = SummarizeCluster(runs, nodes, kNow);
  CHECK(s.runs_by_status ==
        std::map<std::string, int64_t>{
            {"PENDING", 1}, {"QUEUED", 2}, {"RUNNING", 1}, {"STARTING", 1}, {"TERMINATING", 1}});
  CHECK(s.oldest_queued_seconds == 5400);
  using G = std::map<std::array<std::string, 3>, int64_t>;
  CHECK(s.gpus == G{{{"c1", "h100", "allocated"}, 8},  // 6 on a, 2 still held on cordoned b
                    {{"c1", "h100", "free"}, 2},
                    {{"c1", "h100", "cordoned"}, 14},  // 6 on b, 8 on unhealthy e
                    {{"c1", "h100", "lost"}, 8},
                    {{"c2", "h100", "allocated"}, 4},
                    {{"c2", "h100", "free"}, 0}});
  using N = std::map<std::array<std::string, 2>, int64_t>;
  CHECK(s.nodes == N{{{"c1", "ready"}, 1},
                     {{"c1", "cordoned"}, 1},
                     {{"c1", "lost"}, 1},
                     {{"c1", "unhealthy"}, 1},
                     {{"c2", "ready"}, 1}});
  CHECK(SummarizeCluster({}, {}, kNow).oldest_queued_seconds == 0);
}

TEST_CASE("published gauges follow the summary and series it lost go to zero") {
  metrics::Registry r;
  SchedulerMetrics m(r);
  ClusterSummary first;
  first.runs_by_status["QUEUED"] = 3;
  first.gpus[{"c1", "h100", "free"}] = 16;
  first.nodes[{"c1", "ready"}] = 2;
  first.oldest_queued_seconds = 12;
  m.Publish(first);
  CHECK(Value(r, "tessera_runs", {"QUEUED"}) == 3);
  CHECK(Value(r, "tessera_gpus", {"c1", "h100", "free"}) == 16);
  CHECK(Value(r, "tessera_nodes_by_state", {"c1", "ready"}) == 2);
  CHECK(Value(r, "tessera_queue_oldest_wait_seconds") == 12);
  ClusterSummary second;
  second.runs_by_status["RUNNING"] = 1;
  m.Publish(second);
  CHECK(Value(r, "tessera_runs", {"QUEUED"}) == 0);
  CHECK(Value(r, "tessera_runs", {"RUNNING"}) == 1);
  CHECK(Value(r, "tessera_gpus", {"c1", "h100", "free"}) == 0);
  CHECK(Value(r, "tessera_nodes_by_state", {"c1", "ready"}) == 0);
  CHECK(Value(r, "tessera_queue_oldest_wait_seconds") == 0);
  m.Placed(absl::Seconds(42));
  CHECK(Value(r, "tessera_scheduler_placements_total") == 1);
  CHECK(Value(r, "tessera_queue_wait_seconds") == 1);  // one observation
}

TEST_CASE("a scheduler's cycles report placements and lost nodes and the GPUs they hold") {
  Fixture f;
  metrics::Registry r;
  f.core = f.NewCore(nullptr, &r);
  f.Register("n1");
  f.Register("n2");
  v1::Run run = f.Submit(8, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());            // admitted and placed at once
  CHECK(Value(r, "tessera_runs", {"PENDING"}) == 1);  // as the cycle found them
  CHECK(Value(r, "tessera_scheduler_placements_total") == 1);
  CHECK(Value(r, "tessera_queue_wait_seconds") == 1);
  f.clock->Advance(absl::Seconds(1));  // the gauges are summed up at most once a second
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(Value(r, "tessera_runs", {"STARTING"}) == 1);
  CHECK(Value(r, "tessera_runs", {"PENDING"}) == 0);
  CHECK(Value(r, "tessera_gpus", {"local", "sim", "allocated"}) == 8);
  CHECK(Value(r, "tessera_gpus", {"local", "sim", "free"}) == 8);
  CHECK(Value(r, "tessera_nodes_by_state", {"local", "ready"}) == 2);
  f.clock->Advance(absl::Seconds(1));

  // The run's node goes silent past its lease.
  const std::string node = f.Get(run).nodes(0).node_name();
  const std::string other = node == "n1" ? "n2" : "n1";
  f.clock->Advance(absl::Milliseconds(999));  // 1 ms before the lease of 3 s ends
  REQUIRE(f.core->sessions->Heartbeat(other, {}).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(Value(r, "tessera_node_lease_expiries_total") == 0);
  f.clock->Advance(absl::Milliseconds(1));
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(Value(r, "tessera_node_lease_expiries_total") == 1);
  f.clock->Advance(absl::Seconds(1));
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(Value(r, "tessera_nodes_by_state", {"local", "lost"}) == 1);
  CHECK(Value(r, "tessera_gpus", {"local", "sim", "lost"}) == 8);
  // A leader that steps down publishes nothing of the cluster any more.
  f.core->cycle->EndTerm();
  CHECK(Value(r, "tessera_nodes_by_state", {"local", "lost"}) == 0);
  CHECK(Value(r, "tessera_runs", {"STARTING"}) == 0);
}

}  // namespace cluster_metrics_test
}  // namespace tessera::scheduler
