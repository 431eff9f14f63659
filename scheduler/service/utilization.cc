#include "scheduler/service/utilization.h"

#include <algorithm>
#include <map>
#include <set>

#include "scheduler/service/cluster_metrics.h"

namespace tessera::scheduler {

v1::GetUtilizationResponse Utilization(const std::vector<v1::Run>& runs,
                                       const std::vector<v1::Node>& nodes, absl::Time now,
                                       const std::string& only_cluster) {
  const ClusterSummary summary = SummarizeCluster(runs, nodes, now);
  std::map<std::string, v1::ClusterUtilization> clusters;
  std::map<std::string, std::set<std::string>> types;
  std::map<std::string, std::string> cluster_of_node;
  for (const v1::Node& node : nodes) {
    v1::ClusterUtilization& c = clusters[node.cluster()];
    c.set_cluster(node.cluster());
    c.set_nodes(c.nodes() + 1);
    c.set_gpus_total(c.gpus_total() + node.gpu_count());
    if (!node.gpu_type().empty()) types[node.cluster()].insert(node.gpu_type());
    cluster_of_node[node.name()] = node.cluster();
  }
  for (const auto& [key, gpus] : summary.gpus) {
    auto it = clusters.find(key[0]);
    if (it == clusters.end()) continue;
    v1::ClusterUtilization& c = it->second;
    const int n = static_cast<int>(gpus);
    if (key[2] == "allocated") c.set_gpus_in_use(c.gpus_in_use() + n);
    if (key[2] == "free") c.set_gpus_free(c.gpus_free() + n);
    if (key[2] == "cordoned") c.set_gpus_cordoned(c.gpus_cordoned() + n);
    if (key[2] == "lost") c.set_gpus_lost(c.gpus_lost() + n);
  }
  // A spare is schedulable (else it would not be one), so its GPUs that no preemptible work
  // holds were counted free; they are kept for resumptions.
  std::map<std::string, int> held;  // GPUs of each node that active runs hold
  for (const v1::Run& run : runs) {
    if (run.status() != v1::RUN_STATUS_STARTING && run.status() != v1::RUN_STATUS_RUNNING &&
        run.status() != v1::RUN_STATUS_TERMINATING) {
      continue;  // as SummarizeCluster counts them
    }
    for (const auto& n : run.nodes()) held[n.node_name()] += n.gpu_indices_size();
  }
  for (const v1::Node& node : nodes) {
    if (!node.spare() || node.liveness() != v1::NODE_LIVENESS_ONLINE) continue;
    v1::ClusterUtilization& c = clusters[node.cluster()];
    const int idle = std::max(0, node.gpu_count() - held[node.name()]);
    c.set_nodes_spare(c.nodes_spare() + 1);
    c.set_gpus_spare(c.gpus_spare() + idle);
    c.set_gpus_free(std::max(0, c.gpus_free() - idle));
  }
  v1::GetUtilizationResponse resp;
  for (const v1::Run& run : runs) {
    if (run.status() == v1::RUN_STATUS_QUEUED || run.status() == v1::RUN_STATUS_PENDING) {
      const std::string& cluster = run.spec().compute().cluster();
      if (cluster.empty()) {
        resp.set_runs_queued_any_cluster(resp.runs_queued_any_cluster() + 1);
      } else if (auto it = clusters.find(cluster); it != clusters.end()) {
        it->second.set_runs_queued(it->second.runs_queued() + 1);
      }
      continue;
    }
    // An active run counts in the cluster of its first node.
    if (run.nodes_size() == 0) continue;
    auto node = cluster_of_node.find(run.nodes(0).node_name());
    if (node == cluster_of_node.end()) continue;
    v1::ClusterUtilization& c = clusters[node->second];
    c.set_runs_running(c.runs_running() + 1);
  }
  for (auto& [name, c] : clusters) {
    if (!only_cluster.empty() && name != only_cluster) continue;
    for (const std::string& type : types[name]) c.add_gpu_types(type);
    *resp.add_clusters() = std::move(c);
  }
  return resp;
}

}  // namespace tessera::scheduler
