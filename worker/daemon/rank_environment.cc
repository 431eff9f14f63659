#include "worker/daemon/rank_environment.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "runspec/yaml_emit.h"
#include "yaml-cpp/yaml.h"

namespace tessera::worker {
namespace {

// Set by the worker for every rank; a run's env_variables may not replace them, since a wrong
// RANK or WORLD_SIZE would hang or corrupt a distributed job in ways that are hard to trace.
constexpr const char* kReserved[] = {"RUN_NAME",
                                     "RUN_ID",
                                     "WORLD_SIZE",
                                     "RANK",
                                     "LOCAL_RANK",
                                     "LOCAL_WORLD_SIZE",
                                     "NODE_RANK",
                                     "NUM_NODES",
                                     "MASTER_ADDR",
                                     "MASTER_PORT",
                                     "RESUMPTION_INDEX",
                                     "PARAMETERS",
                                     "CUDA_VISIBLE_DEVICES",
                                     "TESSERA_PROGRESS_FILE",
                                     "TESSERA_PROGRESS_DIR",
                                     "TESSERA_FIRST_RANK",
                                     "COMPOSER_RUN_NAME"};

}  // namespace

bool IsReservedRankVariable(const std::string& name) {
  for (const char* reserved : kReserved) {
    if (name == reserved) return true;
  }
  return false;
}

AttemptPaths PathsFor(const std::string& state_dir, const std::string& run_id, int resumption) {
  AttemptPaths p;
  p.dir = absl::StrCat(state_dir, "/runs/", run_id, "/attempt-", resumption);
  p.work_dir = p.dir + "/work";
  p.logs_dir = p.dir + "/logs";
  p.progress_dir = p.dir + "/progress";
  p.parameters_path = p.dir + "/parameters.json";
  p.parameters_yaml_path = p.dir + "/parameters.yaml";
  return p;
}

std::string RankProgressPath(const AttemptPaths& paths, int rank) {
  return absl::StrCat(paths.progress_dir, "/rank-", rank, ".progress");
}

std::string RankLogPath(const AttemptPaths& paths, int rank, const std::string& stream) {
  return absl::StrCat(paths.logs_dir, "/rank-", rank, ".", stream);
}

absl::StatusOr<std::string> ParametersAsYaml(const std::string& json) {
  google::protobuf::Struct parameters;
  if (!google::protobuf::util::JsonStringToMessage(json, &parameters).ok()) {
    return absl::InvalidArgumentError("start_attempt.parameters_json: not a JSON object");
  }
  YAML::Emitter out;
  out << YAML::BeginMap;
  spec::EmitStructEntries(out, parameters);
  out << YAML::EndMap;
  if (!out.good()) {
    return absl::InternalError(absl::StrCat("the parameters as YAML: ", out.GetLastError()));
  }
  return std::string(out.c_str()) + "\n";
}

bool LaunchesPerNode(const v1::StartAttempt& start) {
  return start.launch() == v1::LAUNCH_MODE_NODE;
}

namespace {

// A process of the attempt known to the worker as `rank`: the command, in the work folder, its
// output spooled as that rank's, and what every process of the attempt on this node shares, in
// both launch modes.
RankSpec ProcessSpec(const v1::StartAttempt& start, const AttemptPaths& paths, int rank,
                     int local_rank) {
  RankSpec spec;
  spec.rank = rank;
  spec.local_rank = local_rank;
  spec.command = start.command();
  spec.working_dir = paths.work_dir;
  spec.stdout_path = RankLogPath(paths, rank, "stdout");
  spec.stderr_path = RankLogPath(paths, rank, "stderr");
  auto& env = spec.env;
  for (const auto& [k, v] : start.env()) env[k] = v;
  env["RUN_NAME"] = start.run_name();
  env["RUN_ID"] = start.run_id();
  env["WORLD_SIZE"] = std::to_string(start.world_size());
  env["LOCAL_WORLD_SIZE"] = std::to_string(start.local_world_size());
  env["NODE_RANK"] = std::to_string(start.node_rank());
  env["NUM_NODES"] = std::to_string(start.num_nodes());
  env["MASTER_ADDR"] = start.master_addr();
  env["MASTER_PORT"] = std::to_string(start.master_port());
  env["RESUMPTION_INDEX"] = std::to_string(start.resumption_index());
  env["PARAMETERS"] = paths.parameters_path;
  // Python prints through a buffer when stdout is a file; unbuffered output is what makes
  // `mcli logs -f` live. A user's own setting wins.
  if (!env.count("PYTHONUNBUFFERED")) env["PYTHONUNBUFFERED"] = "1";
  return spec;
}

}  // namespace

RankSpec NodeLauncherSpec(const v1::StartAttempt& start, const AttemptPaths& paths,
                          bool simulated_gpus) {
  // The launcher stands for the node: the worker knows it by the node's first rank.
  RankSpec spec = ProcessSpec(start, paths, start.first_rank(), 0);
  auto& env = spec.env;
  // mcli's name for the run, which Composer reads.
  env["COMPOSER_RUN_NAME"] = start.run_name();
  // The launcher sets RANK and LOCAL_RANK for each process it starts; each reports its progress
  // to rank-<RANK>.progress here, where the worker watches it.
  env["TESSERA_PROGRESS_DIR"] = paths.progress_dir;
  // The node's first global rank: NODE_RANK * LOCAL_WORLD_SIZE where nodes are alike, which
  // Tessera does not require.
  env["TESSERA_FIRST_RANK"] = std::to_string(start.first_rank());
  if (start.gpu_indices_size() > 0) {
    // Every GPU of the node's ranks, in local-rank order: LOCAL_RANK picks the device.
    std::vector<std::string> gpus;
    for (int g : start.gpu_indices()) gpus.push_back(std::to_string(g));
    env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(gpus, ",");
    if (simulated_gpus) env["TESSERA_SIMULATED_GPUS"] = "1";
  }
  return spec;
}

absl::StatusOr<std::vector<RankSpec>> BuildRankSpecs(const v1::StartAttempt& start,
                                                     const AttemptPaths& paths,
                                                     bool simulated_gpus) {
  if (start.run_id().empty()) return absl::InvalidArgumentError("start_attempt.run_id: required");
  if (start.command().empty()) {
    return absl::InvalidArgumentError("start_attempt.command: the run has no command");
  }
  const int local = start.local_world_size();
  if (local <= 0) {
    return absl::InvalidArgumentError("start_attempt.local_world_size: must be positive");
  }
  if (start.gpu_indices_size() > 0 && start.gpu_indices_size() != local) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_attempt.gpu_indices: ", start.gpu_indices_size(),
                     " GPUs for a local world size of ", local));
  }
  if (start.first_rank() < 0 || start.first_rank() + local > start.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start_attempt.first_rank: ranks ", start.first_rank(), "..",
        start.first_rank() + local - 1, " do not fit a world size of ", start.world_size()));
  }
  for (const char* name : kReserved) {
    if (start.env().count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "start_attempt.env.", name, ": set by Tessera for every rank; choose another name"));
    }
  }
  std::vector<RankSpec> specs;
  if (LaunchesPerNode(start)) {
    specs.push_back(NodeLauncherSpec(start, paths, simulated_gpus));
    return specs;
  }
  for (int local_rank = 0; local_rank < local; ++local_rank) {
    RankSpec spec = ProcessSpec(start, paths, start.first_rank() + local_rank, local_rank);
    auto& env = spec.env;
    env["RANK"] = std::to_string(spec.rank);
    env["LOCAL_RANK"] = std::to_string(local_rank);
    env["TESSERA_PROGRESS_FILE"] = RankProgressPath(paths, spec.rank);
    if (start.gpu_indices_size() > 0) {
      // One GPU per rank: frameworks then use device 0 of what they see.
      env["CUDA_VISIBLE_DEVICES"] = std::to_string(start.gpu_indices(local_rank));
      if (simulated_gpus) env["TESSERA_SIMULATED_GPUS"] = "1";
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

}  // namespace tessera::worker
