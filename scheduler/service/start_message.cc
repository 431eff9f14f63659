#include "scheduler/service/start_message.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "google/protobuf/util/json_util.h"

namespace tessera::scheduler {

int RanksOnNode(const v1::Run& run, const v1::AttemptNode& node,
                const std::map<std::string, const v1::Node*>& nodes) {
  if (node.gpu_indices_size() > 0) return node.gpu_indices_size();
  if (run.spec().compute().procs_per_node() > 0) return run.spec().compute().procs_per_node();
  int procs = 1;
  if (auto it = nodes.find(node.node_name()); it != nodes.end()) {
    auto label = it->second->labels().find(std::string(kProcsPerNodeLabel));
    if (label != it->second->labels().end() && !absl::SimpleAtoi(label->second, &procs)) {
      procs = 1;
    }
  }
  return std::max(1, procs);
}

v1::StartAttempt StartCommand(const v1::Run& run, const v1::Attempt& attempt,
                              const v1::AttemptNode& node, int world_size, int local_size,
                              int first_rank, const SchedulerConfig& config) {
  v1::StartAttempt s;
  s.set_run_id(run.id());
  s.set_run_name(run.name());
  s.set_resumption_index(attempt.resumption_index());
  s.set_command(run.spec().command());
  for (const auto& e : run.spec().env_variables()) (*s.mutable_env())[e.key()] = e.value();
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  // MessageToJsonString appends to its output: start from an empty string.
  std::string json;
  if (run.spec().has_parameters()) {
    (void)google::protobuf::util::MessageToJsonString(run.spec().parameters(), &json, opts);
  }
  if (json.empty()) json = "{}";
  s.set_parameters_json(json);
  s.set_node_rank(node.node_rank());
  s.set_num_nodes(attempt.nodes_size());
  s.set_world_size(world_size);
  s.set_first_rank(first_rank);
  s.set_local_world_size(local_size);
  s.set_master_addr(attempt.master_addr());
  s.set_master_port(attempt.master_port());
  *s.mutable_gpu_indices() = node.gpu_indices();
  s.mutable_stop_grace_period()->set_seconds(absl::ToInt64Seconds(config.stop_grace));
  s.set_hang_timeout_seconds(run.spec().scheduling().hang_timeout_seconds());
  s.set_image(run.spec().image());
  s.set_image_digest(run.image_digest());
  s.set_user(run.user());
  s.set_user_uid(run.user_uid());
  *s.mutable_integrations() = run.spec().integrations();
  // mcli's contract unless the run asks for one process per rank.
  s.set_launch(run.spec().launch() == v1::LAUNCH_MODE_RANK ? v1::LAUNCH_MODE_RANK
                                                           : v1::LAUNCH_MODE_NODE);
  return s;
}

std::map<std::string, std::string> ClusterDriverVersions(const std::vector<v1::Node>& nodes) {
  std::map<std::string, std::map<std::string, int>> counts;  // cluster -> version -> nodes
  std::map<std::string, int> with_driver;
  for (const auto& n : nodes) {
    if (n.driver_version().empty()) continue;
    ++counts[n.cluster()][n.driver_version()];
    ++with_driver[n.cluster()];
  }
  std::map<std::string, std::string> out;
  for (const auto& [cluster, versions] : counts) {
    for (const auto& [version, count] : versions) {
      if (2 * count > with_driver[cluster]) out[cluster] = version;
    }
  }
  return out;
}

v1::PreflightExpectations PreflightFor(const v1::AttemptNode& node, const v1::Node* inventory,
                                       const std::map<std::string, std::string>& drivers,
                                       const SchedulerConfig& config) {
  v1::PreflightExpectations p;
  for (int index : node.gpu_indices()) {
    std::string uuid;
    if (inventory != nullptr) {
      for (const auto& g : inventory->gpus()) {
        if (g.index() == index) uuid = g.uuid();
      }
    }
    p.add_gpu_uuids(uuid);
  }
  if (inventory != nullptr) {
    if (auto it = drivers.find(inventory->cluster()); it != drivers.end()) {
      p.set_driver_version(it->second);
    }
  }
  p.set_max_clock_skew_seconds(absl::ToDoubleSeconds(config.max_clock_skew));
  return p;
}

}  // namespace tessera::scheduler
