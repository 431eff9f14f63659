// tessera-train: trains a GPT with sharded data parallelism. Reads its configuration from
// --config, else from $PARAMETERS (the run's `parameters`, written by the worker), and its place
// in the job from RANK, WORLD_SIZE, MASTER_ADDR ... (a single rank when they are absent).
// Started once per node (NODE_RANK and LOCAL_WORLD_SIZE without RANK), it starts the node's
// ranks itself (local_ranks.h).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "base/file_util.h"
#include "worker/engine/train/local_ranks.h"
#include "worker/engine/train/rank_context.h"
#include "worker/engine/train/runtime_tuning.h"
#include "worker/engine/train/train_config.h"
#include "worker/engine/train/trainer.h"

namespace {

// How long the node's other ranks have to stop once one failed: a collective they wait in
// fails at once when a peer is gone, so they end well within it.
constexpr absl::Duration kRankStopGrace = absl::Seconds(30);

int Fail(const absl::Status& st) {
  std::cerr << "tessera-train: " << st.message() << std::endl;
  return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  tessera::engine::EnsurePassiveOpenMpWait(argv);
  CLI::App app{
      "tessera-train: a LibTorch GPT trainer with sharded data parallelism and autoresume"};
  std::string config_path;
  app.add_option("--config", config_path, "training YAML (default: $PARAMETERS)");
  CLI11_PARSE(app, argc, argv);
  tessera::engine::TuneAllocatorForTraining();
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");

  const auto env = tessera::engine::ProcessEnvironment();
  // Started once for the node (mcli's contract): start the node's ranks, each this program.
  auto local_ranks = tessera::engine::PlanLocalRanks(env);
  if (!local_ranks.ok()) return Fail(local_ranks.status());
  if (*local_ranks) {
    return tessera::engine::RunLocalRanks("/proc/self/exe",
                                          std::vector<std::string>(argv, argv + argc),
                                          **local_ranks, kRankStopGrace);
  }
  auto context = tessera::engine::RankContextFromEnv(env);
  if (!context.ok()) return Fail(context.status());
  if (config_path.empty()) config_path = context->parameters_path;
  if (config_path.empty()) {
    return Fail(absl::InvalidArgumentError(
        "no configuration: pass --config FILE or run under a worker (PARAMETERS)"));
  }
  auto text = tessera::ReadWholeFile(config_path);
  if (!text.ok()) return Fail(text.status());
  auto config = tessera::engine::ParseTrainConfig(*text, config_path, env);
  if (!config.ok()) return Fail(config.status());
  try {
    auto trainer = tessera::engine::Trainer::Create(*std::move(config), *context);
    if (!trainer.ok()) return Fail(trainer.status());
    if (auto st = (*trainer)->Run(); !st.ok()) return Fail(st);
  } catch (const std::exception& e) {
    // LibTorch and c10d report failures (a peer that died mid-collective) as exceptions.
    return Fail(absl::InternalError(e.what()));
  }
  return 0;
}
