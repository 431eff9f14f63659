#include "worker/engine/train/trainer_checkpoints.h"

#include <spdlog/spdlog.h>

#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "worker/engine/dist/store_commit_channel.h"

namespace tessera::engine {
namespace {

constexpr const char* kArrays[] = {"params", "exp_avg", "exp_avg_sq"};

// Started by a worker: this attempt owns the folder from now, so that one before it, whose ranks
// may still run on a node lost a moment ago, commits nothing more there.
std::optional<FolderOwner> AttemptOwner(const RankContext& ctx) {
  if (ctx.run_id.empty()) return std::nullopt;
  return FolderOwner{ctx.run_id, ctx.resumption_index};
}

}  // namespace

TrainerCheckpoints::TrainerCheckpoints(const TrainConfig& config, const RankContext& ctx,
                                       ShardGroups& groups, torch::Device device,
                                       ParameterSharding& parameters, ShardedAdamW& optimizer)
    : config_(config),
      ctx_(ctx),
      groups_(groups),
      device_(device),
      parameters_(parameters),
      optimizer_(optimizer),
      folder_(config.save_folder, AttemptOwner(ctx)) {}

TrainerCheckpoints::~TrainerCheckpoints() {
  if (saver_) saver_->Wait().IgnoreError();
}

absl::StatusOr<std::unique_ptr<TrainerCheckpoints>> TrainerCheckpoints::Create(
    const TrainConfig& config, const RankContext& ctx, ShardGroups& groups, PeerWaits* waits,
    torch::Device device, ParameterSharding& parameters, ShardedAdamW& optimizer) {
  std::unique_ptr<TrainerCheckpoints> c(
      new TrainerCheckpoints(config, ctx, groups, device, parameters, optimizer));
  SaveRole role;
  role.shard_index = groups.shard_index();
  role.shard_count = groups.shard_group_size();
  role.writes_shard = groups.writes_shard();
  role.commits = ctx.rank == 0;
  if (ctx.world_size > 1) {
    Rendezvous rv{ctx.rank, ctx.world_size, ctx.master_addr, ctx.master_port};
    TESSERA_ASSIGN_OR_RETURN(auto client, ConnectExtraClient(rv));
    c->commit_channel_ = std::make_unique<StoreCommitChannel>(std::move(client), waits);
  } else {
    c->commit_channel_ = std::make_unique<InProcessCommitChannel>();
  }
  if (role.commits) TESSERA_RETURN_IF_ERROR(c->folder_.Claim());
  c->saver_ = std::make_unique<CheckpointSaver>(c->folder_, c->commit_channel_.get(), role,
                                                config.num_checkpoints_to_keep,
                                                absl::Seconds(config.save_commit_timeout_seconds));
  if (config.memory_checkpoint_interval.value > 0) {
    if (!ctx.memory_checkpoint_dir.empty()) {
      c->memory_ = std::make_unique<MemoryCheckpointer>(
          MemoryCheckpointStore(ctx.memory_checkpoint_dir, ctx.memory_checkpoint_bytes),
          groups.world(), ctx, role, device);
    } else if (ctx.rank == 0) {
      spdlog::warn(
          "memory_checkpoint_interval is set, but this node's worker gives the run no memory "
          "folder (TESSERA_MEMORY_CHECKPOINT_DIR): checkpoints on disk only");
    }
  }
  return c;
}

absl::StatusOr<std::optional<CheckpointManifest>> TrainerCheckpoints::Resume() {
  if (memory_) {
    // Memory is a shortcut: whatever goes wrong there, the disk's checkpoints remain.
    const auto recovered = memory_->Recover(folder_, Compatible(INT64_MAX));
    if (!recovered.ok() && ctx_.rank == 0) {
      spdlog::warn("in-memory checkpoints passed over: {}",
                   std::string(recovered.status().message()));
    }
  }
  return LoadNewest();
}

CheckpointFolder::Compatible TrainerCheckpoints::Compatible(int64_t max_step) const {
  return [this, max_step,
          shape = config_.model.ShapeHash()](const CheckpointManifest& m) -> absl::Status {
    if (m.step > max_step) {
      return absl::FailedPreconditionError(
          absl::StrCat("it is later than step ", max_step, ", rolled back from"));
    }
    if (m.config_hash != shape || m.numel != parameters_.numel()) {
      return absl::FailedPreconditionError(
          absl::StrCat("it holds a model of another shape (", m.model.dump(), ")"));
    }
    if (m.arrays != std::vector<std::string>(std::begin(kArrays), std::end(kArrays))) {
      return absl::FailedPreconditionError("it holds other arrays than this trainer's");
    }
    return absl::OkStatus();
  };
}

absl::StatusOr<std::optional<CheckpointManifest>> TrainerCheckpoints::LoadNewest(int64_t max_step) {
  // Rank 0 chooses (reading every shard once to check its hash); everyone loads its choice.
  auto chosen =
      torch::full({1}, int64_t{-1}, torch::TensorOptions().dtype(torch::kInt64).device(device_));
  if (ctx_.rank == 0) {
    std::vector<std::string> refused;
    auto latest = folder_.LatestValid(Compatible(max_step), &refused);
    for (const auto& why : refused) spdlog::warn("checkpoint refused: {}", why);
    if (latest) chosen.fill_(latest->step);
  }
  groups_.world().Broadcast(chosen, 0);
  const int64_t step = chosen.to(torch::kCPU).item<int64_t>();
  if (step < 0) {
    if (ctx_.rank == 0) spdlog::info("no checkpoint in {}: starting from scratch", folder_.root());
    return std::nullopt;
  }
  TESSERA_ASSIGN_OR_RETURN(CheckpointManifest manifest, folder_.ReadManifest(step));
  const int64_t begin = parameters_.shard_begin(), count = parameters_.shard_count();
  torch::Tensor targets[] = {parameters_.ParamShard(), optimizer_.exp_avg(),
                             optimizer_.exp_avg_sq()};
  auto staging = torch::empty({count}, torch::kFloat32);
  for (int a = 0; a < 3; ++a) {
    TESSERA_RETURN_IF_ERROR(ReadFlatRange(folder_.StepFolder(step), manifest, a, begin,
                                          begin + count, staging.data_ptr<float>()));
    torch::NoGradGuard no_grad;
    targets[a].narrow(0, 0, count).copy_(staging);
  }
  parameters_.ShardUpdated();
  last_saved_step_ = manifest.step;
  return manifest;
}

CheckpointManifest TrainerCheckpoints::ManifestAt(const TrainingPosition& now) const {
  CheckpointManifest m;
  m.step = now.step;
  m.world_size = ctx_.world_size;
  m.sharding = ShardingName(config_.sharding);
  m.shard_group_size = groups_.shard_group_size();
  m.numel = parameters_.numel();
  m.arrays.assign(std::begin(kArrays), std::end(kArrays));
  m.data = now.data;
  m.tokens_seen = now.tokens_seen;
  m.loss_rollbacks = now.loss_rollbacks;
  m.skipped_batches = now.skipped_batches;
  m.seed = config_.seed;
  m.config_hash = config_.model.ShapeHash();
  m.model = config_.model.ToJson();
  m.saved_at = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  return m;
}

std::vector<torch::Tensor> TrainerCheckpoints::ShardArrays() const {
  std::vector<torch::Tensor> arrays;
  for (const torch::Tensor& t :
       {parameters_.ParamShard(), optimizer_.exp_avg(), optimizer_.exp_avg_sq()}) {
    arrays.push_back(t.narrow(0, 0, parameters_.shard_count()));
  }
  return arrays;
}

absl::Status TrainerCheckpoints::Save(const TrainingPosition& now, bool background) {
  SaveJob job;
  job.manifest = ManifestAt(now);
  job.payload.offset = parameters_.shard_begin();
  job.payload.count = parameters_.shard_count();
  std::vector<torch::Tensor> host;  // GPU shards are copied to host memory first
  for (torch::Tensor t : ShardArrays()) {
    if (!t.is_cpu()) t = t.to(torch::kCPU);
    host.push_back(t.contiguous());
    job.payload.arrays.push_back(host.back().data_ptr<float>());
  }
  last_saved_step_ = now.step;
  return saver_->Save(job, background && config_.save_in_background);
}

void TrainerCheckpoints::SnapshotInMemory(const TrainingPosition& now) {
  if (!memory_) return;
  // A failed snapshot is logged by the checkpointer and costs only itself.
  memory_->Snapshot(ManifestAt(now), ShardArrays(), parameters_.shard_begin()).IgnoreError();
}

}  // namespace tessera::engine
