#include "worker/daemon/rank_environment.h"

#include <catch2/catch.hpp>

#include "yaml-cpp/yaml.h"

namespace tessera::worker {
namespace rank_environment_test {

v1::StartAttempt Start() {
  v1::StartAttempt s;
  s.set_run_id("run-1");
  s.set_run_name("gpt-x");
  s.set_resumption_index(2);
  s.set_command("python train.py");
  s.set_node_rank(1);
  s.set_num_nodes(2);
  s.set_world_size(4);
  s.set_first_rank(2);
  s.set_local_world_size(2);
  s.set_master_addr("10.0.0.1");
  s.set_master_port(29517);
  s.add_gpu_indices(4);
  s.add_gpu_indices(5);
  (*s.mutable_env())["WANDB_PROJECT"] = "p";
  return s;
}

TEST_CASE("each local rank gets every variable of the design") {
  const AttemptPaths paths = PathsFor("/state", "run-1", 2);
  auto specs = BuildRankSpecs(Start(), paths, /*simulated_gpus=*/false);
  REQUIRE(specs.ok());
  REQUIRE(specs->size() == 2);
  const RankSpec& r = (*specs)[1];
  CHECK(r.rank == 3);
  CHECK(r.local_rank == 1);
  CHECK(r.command == "python train.py");
  CHECK(r.working_dir == "/state/runs/run-1/attempt-2/work");
  CHECK(r.stdout_path == "/state/runs/run-1/attempt-2/logs/rank-3.stdout");
  CHECK(r.stderr_path == "/state/runs/run-1/attempt-2/logs/rank-3.stderr");
  const std::map<std::string, std::string> want = {
      {"RUN_NAME", "gpt-x"},
      {"RUN_ID", "run-1"},
      {"WORLD_SIZE", "4"},
      {"RANK", "3"},
      {"LOCAL_RANK", "1"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"NODE_RANK", "1"},
      {"NUM_NODES", "2"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29517"},
      {"RESUMPTION_INDEX", "2"},
      {"CUDA_VISIBLE_DEVICES", "5"},
      {"WANDB_PROJECT", "p"},
      {"PYTHONUNBUFFERED", "1"},
      {"PARAMETERS", "/state/runs/run-1/attempt-2/parameters.json"},
      {"TESSERA_PROGRESS_FILE", "/state/runs/run-1/attempt-2/progress/rank-3.progress"}};
  CHECK(r.env == want);
  CHECK((*specs)[0].env.at("CUDA_VISIBLE_DEVICES") == "4");
}

TEST_CASE("CPU-only ranks get no CUDA_VISIBLE_DEVICES, simulated GPUs are marked") {
  v1::StartAttempt s = Start();
  s.clear_gpu_indices();
  auto cpu = BuildRankSpecs(s, PathsFor("/s", "run-1", 0), false);
  REQUIRE(cpu.ok());
  CHECK((*cpu)[0].env.count("CUDA_VISIBLE_DEVICES") == 0);
  auto sim = BuildRankSpecs(Start(), PathsFor("/s", "run-1", 0), true);
  REQUIRE(sim.ok());
  CHECK((*sim)[0].env.at("TESSERA_SIMULATED_GPUS") == "1");
}

TEST_CASE("a user's PYTHONUNBUFFERED wins") {
  v1::StartAttempt s = Start();
  (*s.mutable_env())["PYTHONUNBUFFERED"] = "0";
  auto specs = BuildRankSpecs(s, PathsFor("/s", "run-1", 0), false);
  REQUIRE(specs.ok());
  CHECK((*specs)[0].env.at("PYTHONUNBUFFERED") == "0");
}

TEST_CASE("bad start commands are refused with the field named") {
  auto error = [](v1::StartAttempt s) {
    auto specs = BuildRankSpecs(s, PathsFor("/s", "r", 0), false);
    REQUIRE_FALSE(specs.ok());
    CHECK(absl::IsInvalidArgument(specs.status()));
    return std::string(specs.status().message());
  };
  v1::StartAttempt s = Start();
  s.set_command("");
  CHECK(error(s).find("start_attempt.command") == 0);
  s = Start();
  (*s.mutable_env())["RANK"] = "0";
  CHECK(error(s).find("start_attempt.env.RANK") == 0);
  s = Start();
  s.add_gpu_indices(6);
  CHECK(error(s).find("start_attempt.gpu_indices: 3 GPUs for a local world size of 2") == 0);
  s = Start();
  s.set_first_rank(3);
  CHECK(error(s).find("start_attempt.first_rank: ranks 3..4 do not fit a world size of 4") == 0);
  s = Start();
  s.set_local_world_size(0);
  s.clear_gpu_indices();
  CHECK(error(s).find("start_attempt.local_world_size") == 0);
  s = Start();
  s.clear_run_id();
  CHECK(error(s).find("start_attempt.run_id") == 0);
}

TEST_CASE("launched per node: one launcher with mcli's variables, every GPU, no RANK") {
  v1::StartAttempt start = Start();
  start.set_launch(v1::LAUNCH_MODE_NODE);
  const AttemptPaths paths = PathsFor("/state", "run-1", 2);
  auto specs = BuildRankSpecs(start, paths, /*simulated_gpus=*/false);
  REQUIRE(specs.ok());
  REQUIRE(specs->size() == 1);
  const RankSpec& launcher = specs->front();
  CHECK(launcher.rank == 2);  // known by the node's first rank
  CHECK(launcher.command == "python train.py");
  CHECK(launcher.stdout_path == "/state/runs/run-1/attempt-2/logs/rank-2.stdout");
  const std::map<std::string, std::string> want = {
      {"RUN_NAME", "gpt-x"},
      {"COMPOSER_RUN_NAME", "gpt-x"},
      {"RUN_ID", "run-1"},
      {"WORLD_SIZE", "4"},
      {"LOCAL_WORLD_SIZE", "2"},
      {"NODE_RANK", "1"},
      {"NUM_NODES", "2"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "29517"},
      {"RESUMPTION_INDEX", "2"},
      {"CUDA_VISIBLE_DEVICES", "4,5"},
      {"WANDB_PROJECT", "p"},
      {"PYTHONUNBUFFERED", "1"},
      {"PARAMETERS", "/state/runs/run-1/attempt-2/parameters.json"},
      {"TESSERA_PROGRESS_DIR", "/state/runs/run-1/attempt-2/progress"},
      {"TESSERA_FIRST_RANK", "2"}};
  CHECK(launcher.env == want);
  CHECK(paths.parameters_yaml_path == "/state/runs/run-1/attempt-2/parameters.yaml");
  // A control plane from before launch modes meant one process per rank.
  start.set_launch(v1::LAUNCH_MODE_UNSPECIFIED);
  CHECK_FALSE(LaunchesPerNode(start));
  CHECK(BuildRankSpecs(start, paths, false)->size() == 2);
  // The launcher's own variables are the design's too: a run may not set them.
  start.set_launch(v1::LAUNCH_MODE_NODE);
  for (const char* name : {"COMPOSER_RUN_NAME", "TESSERA_PROGRESS_DIR", "TESSERA_FIRST_RANK"}) {
    v1::StartAttempt s = start;
    (*s.mutable_env())[name] = "x";
    CHECK_FALSE(BuildRankSpecs(s, paths, false).ok());
  }
}

TEST_CASE("the parameters as YAML for /mnt/config/parameters.yaml read back as the same values") {
  auto yaml = ParametersAsYaml(
      R"({"model":{"name":"mpt-125m","d_model":768},"lr":0.0006,"tags":["a","b"],"fsdp":true})");
  REQUIRE(yaml.ok());
  const YAML::Node read = YAML::Load(*yaml);
  CHECK(read["model"]["name"].as<std::string>() == "mpt-125m");
  CHECK(read["model"]["d_model"].as<int>() == 768);
  CHECK(read["lr"].as<double>() == 0.0006);
  CHECK(read["tags"][1].as<std::string>() == "b");
  CHECK(read["fsdp"].as<bool>());
  // Block style, as a person (and OmegaConf) reads it, not JSON.
  CHECK(yaml->find("model:\n") != std::string::npos);
  CHECK(ParametersAsYaml("{}").ok());
  auto bad = ParametersAsYaml("[1, 2]");
  REQUIRE_FALSE(bad.ok());
  CHECK(absl::IsInvalidArgument(bad.status()));
}

}  // namespace rank_environment_test
}  // namespace tessera::worker
