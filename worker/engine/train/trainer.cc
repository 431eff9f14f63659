#include "worker/engine/train/trainer.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "worker/engine/data/deterministic_random.h"
#include "worker/engine/data/tokenizer.h"
#include "worker/engine/model/cuda_autocast.h"
#include "worker/engine/train/device_peak.h"
#include "worker/engine/train/lr_schedule.h"
#include "worker/engine/train/model_flops.h"

namespace tessera::engine {
Trainer::Trainer(TrainConfig config, RankContext context)
    : config_(std::move(config)), ctx_(std::move(context)) {}

Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(TrainConfig config, RankContext context) {
  std::unique_ptr<Trainer> t(new Trainer(std::move(config), std::move(context)));
  TESSERA_RETURN_IF_ERROR(t->Setup());
  return t;
}

absl::Status Trainer::Setup() {
  TESSERA_RETURN_IF_ERROR(SetupDevice());
  TESSERA_RETURN_IF_ERROR(SetupData());
  // Before the model seeds the generator.
  const double peak_flops_per_rank = SetupFlops();
  progress_ = std::make_unique<progress::ProgressReporter>(ctx_.progress_file);
  peer_waits_ = std::make_unique<PeerWaits>(
      [progress = progress_.get()](bool waiting) { progress->MarkWaiting(waiting); });
  TESSERA_ASSIGN_OR_RETURN(groups_,
                           ShardGroups::Join(config_, ctx_, device_.is_cuda(), peer_waits_.get()));
  SetupModel(peak_flops_per_rank);
  TESSERA_RETURN_IF_ERROR(SetupCheckpoints());
  if (ctx_.rank == 0) LogShape();
  return absl::OkStatus();
}

absl::Status Trainer::SetupDevice() {
  // Threads: the node's cores shared by its ranks, unless the config says otherwise.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  SetComputeThreads(config_.threads > 0 ? config_.threads
                                        : std::max(1, cores / ctx_.local_world_size));

  const bool cuda =
      config_.device == "cuda" || (config_.device == "auto" && torch::cuda::is_available());
  if (cuda) {
    if (!torch::cuda::is_available()) {
      return absl::FailedPreconditionError("device: cuda, but this LibTorch sees no CUDA device");
    }
    // The worker gives each rank one GPU through CUDA_VISIBLE_DEVICES.
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    const bool one_gpu = visible != nullptr && std::string(visible).find(',') == std::string::npos;
    device_ = torch::Device(torch::kCUDA, one_gpu ? 0 : ctx_.local_rank);
  }
  if (config_.precision == "amp_bf16") {
    if (cuda) {
      SetCudaAutocast(true, at::kBFloat16);
    } else {
      spdlog::warn("precision amp_bf16 applies to GPUs; this CPU run trains in fp32");
    }
  }
  return absl::OkStatus();
}

absl::Status Trainer::SetupData() {
  TESSERA_ASSIGN_OR_RETURN(auto reader, TokenShardReader::Open(config_.data_path));
  const int64_t sample_tokens = reader->index().sample_tokens;
  auto tokenizer = TokenizerFromJson(reader->index().tokenizer);
  if (!tokenizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_.data_path, "/index.json: ", tokenizer.status().message()));
  }
  const int64_t data_vocab = (*tokenizer)->vocab_size();
  if (config_.model.vocab_size == 0) config_.model.vocab_size = data_vocab;
  if (config_.model.vocab_size < data_vocab) {
    return absl::InvalidArgumentError(absl::StrCat("model.vocab_size: ", config_.model.vocab_size,
                                                   " is smaller than the dataset's tokenizer (",
                                                   data_vocab, ")"));
  }
  seq_len_ = std::min(config_.model.max_seq_len, sample_tokens - 1);
  if (config_.global_train_batch_size % ctx_.world_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("global_train_batch_size: ", config_.global_train_batch_size,
                     " does not split evenly over ", ctx_.world_size, " ranks"));
  }
  const int64_t per_rank = config_.global_train_batch_size / ctx_.world_size;
  if (config_.device_train_microbatch_size == 0) config_.device_train_microbatch_size = per_rank;
  if (per_rank % config_.device_train_microbatch_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_train_microbatch_size: ", config_.device_train_microbatch_size,
                     " does not divide the ", per_rank, " samples each rank gets per batch"));
  }
  TESSERA_ASSIGN_OR_RETURN(dataset_, StreamingDataset::Create(std::move(reader), config_.shuffle,
                                                              config_.global_train_batch_size));
  total_steps_ = config_.max_duration.Batches(dataset_->batches_per_epoch());
  batch_buffer_.resize(static_cast<size_t>(per_rank * sample_tokens));
  return absl::OkStatus();
}

double Trainer::SetupFlops() {
  flops_per_token_ = TrainingFlopsPerToken(config_.model, seq_len_);
  double peak_flops_per_rank = 0;  // 0: unknown, no MFU
  if (device_.is_cuda()) {
    // The device name comes from the worker's NVML view when LibTorch cannot say.
    const char* name = std::getenv("TESSERA_GPU_NAME");
    peak_flops_per_rank = GpuPeakFlops(name != nullptr ? name : "").value_or(0);
  } else {
    auto peak = CpuNodePeakFlops(DefaultPeakCachePath());
    if (peak.ok()) {
      peak_flops_per_rank = *peak / ctx_.local_world_size;
    } else {
      spdlog::warn("no CPU peak for MFU: {}", peak.status().ToString());
    }
  }
  return peak_flops_per_rank;
}

void Trainer::SetupModel(double peak_flops_per_rank) {
  // The model: the same seed on every rank gives the same initial parameters.
  torch::manual_seed(config_.seed);
  model_ = Gpt(config_.model);
  model_->to(device_);
  model_->train();
  model_->SetActivationCheckpointing(config_.activation_checkpointing_interval);
  model_->SetExpertGroup(&groups_->expert_group());
  parameters_ = MakeParameterSharding(config_.sharding, model_, *groups_);
  optimizer_ = std::make_unique<ShardedAdamW>(config_.optimizer, parameters_->ParamShard(),
                                              parameters_->DecayShard());
  ReportShape shape;
  shape.total_steps = total_steps_;
  shape.tokens_per_step = config_.global_train_batch_size * seq_len_;
  shape.log_interval = config_.log_interval;
  shape.flops_per_token = flops_per_token_;
  shape.peak_flops_per_rank = peak_flops_per_rank;
  shape.world_size = ctx_.world_size;
  shape.logs = ctx_.rank == 0;
  report_ = std::make_unique<ProgressReport>(progress_.get(), shape, UnixSecondsNow);
}

absl::Status Trainer::SetupCheckpoints() {
  if (config_.save_folder.empty()) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(
      checkpoints_, TrainerCheckpoints::Create(config_, ctx_, *groups_, peer_waits_.get(), device_,
                                               *parameters_, *optimizer_));
  if (!config_.autoresume) return absl::OkStatus();
  TESSERA_ASSIGN_OR_RETURN(const std::optional<CheckpointManifest> loaded, checkpoints_->Resume());
  if (loaded) ContinueFrom(*loaded);
  return absl::OkStatus();
}

void Trainer::LogShape() const {
  const int64_t params = parameters_->numel();
  spdlog::info(
      "tessera-train: GPT {} ({} layers, d_model {}, {} heads, vocab {}, seq {}): {:.2f}M "
      "parameters; {} ranks on {} ({}, {} shard group{} of {}); global batch {}, microbatch {}; "
      "{} steps ({} per epoch of {} samples)",
      config_.model.preset, config_.model.n_layers, config_.model.d_model, config_.model.n_heads,
      config_.model.vocab_size, seq_len_, params / 1e6, ctx_.world_size, device_.str(),
      ShardingName(config_.sharding), groups_->replicas(), groups_->replicas() == 1 ? "" : "s",
      groups_->shard_group_size(), config_.global_train_batch_size,
      config_.device_train_microbatch_size, total_steps_, dataset_->batches_per_epoch(),
      dataset_->samples());
  if (config_.model.is_moe()) {
    spdlog::info(
        "mixture of experts: every block's MLP is {} experts, each token routed to {} (dropless), "
        "load-balancing loss weight {}; {}",
        config_.model.moe_num_experts, config_.model.moe_top_k, config_.model.moe_loss_weight,
        config_.model.moe_world_size == 1
            ? std::string("every rank computes every expert")
            : absl::StrCat("expert-parallel over groups of ", config_.model.moe_world_size,
                           " ranks, ", config_.model.moe_num_experts / config_.model.moe_world_size,
                           " experts each"));
  }
  if (config_.activation_checkpointing_interval > 0) {
    spdlog::info(
        "activation checkpointing: {} of {} recomputed in backward",
        config_.activation_checkpointing_interval == 1
            ? std::string("every block")
            : absl::StrCat("every ", config_.activation_checkpointing_interval, " blocks (0, ",
                           config_.activation_checkpointing_interval, ", ...)"),
        config_.model.n_layers);
  }
}

TrainingPosition Trainer::Position() const {
  TrainingPosition now;
  now.step = step_;
  now.tokens_seen = tokens_seen_;
  now.data = data_state_;
  now.loss_rollbacks = rollback_.count();
  now.skipped_batches = rollback_.skipped();
  return now;
}

void Trainer::ContinueFrom(const CheckpointManifest& loaded) {
  step_ = loaded.step;
  resumed_from_step_ = loaded.step;
  tokens_seen_ = loaded.tokens_seen;
  // A resumption skips what the saving run skipped; a rollback (to an older step) keeps what
  // this run has skipped since.
  rollback_.Merge(loaded.loss_rollbacks, loaded.skipped_batches);
  report_->SetResumedFrom(resumed_from_step_);
  report_->SetLossRollbacks(rollback_.count());
  data_state_ = loaded.data;
  if (data_state_.sample_in_epoch + config_.global_train_batch_size > dataset_->samples()) {
    data_state_ = DataState{data_state_.epoch + 1, 0};  // a larger global batch than before
  }
  if (ctx_.rank == 0) {
    spdlog::info("resumed from step {} in {} (saved by {} ranks, {}); data at epoch {}, sample {}",
                 loaded.step, CheckpointFolder(config_.save_folder).StepFolder(loaded.step),
                 loaded.world_size, loaded.sharding, data_state_.epoch,
                 data_state_.sample_in_epoch);
  }
}

absl::Status Trainer::RollBack(const DataState& batch, double loss, const std::string& why) {
  const int64_t bad_step = step_;
  TESSERA_RETURN_IF_ERROR(rollback_.MayRollBack(loss, why, bad_step));
  std::optional<CheckpointManifest> loaded;
  if (checkpoints_) {
    TESSERA_RETURN_IF_ERROR(checkpoints_->Wait());
    TESSERA_ASSIGN_OR_RETURN(loaded, checkpoints_->LoadNewest(bad_step - 1));
  }
  if (!loaded) {
    return absl::InternalError(
        absl::StrCat(why, " at step ", bad_step, ", and no checkpoint to roll back to"));
  }
  ContinueFrom(*loaded);
  rollback_.RolledBack(batch);
  progress::LossRollbackRecord told;
  told.number = rollback_.count();
  told.max = rollback_.max();
  told.bad_step = bad_step;
  told.checkpoint_step = step_;
  told.reason = why;
  report_->RolledBack(std::move(told));
  if (ctx_.rank == 0) {
    spdlog::warn(
        "loss rollback {} of {}: {} at step {}: back to step {}, skipping that step's batch "
        "(epoch {}, sample {})",
        rollback_.count(), rollback_.max(), why, bad_step, step_, batch.epoch,
        batch.sample_in_epoch);
  }
  return absl::OkStatus();
}

absl::StatusOr<StepResult> Trainer::Step() {
  const int64_t per_rank = config_.global_train_batch_size / ctx_.world_size;
  const int64_t micro = config_.device_train_microbatch_size;
  const int64_t sample_tokens = dataset_->sample_tokens();
  TESSERA_RETURN_IF_ERROR(
      dataset_->ReadBatchSlice(data_state_, ctx_.rank * per_rank, per_rank, batch_buffer_.data()));
  auto batch =
      torch::from_blob(batch_buffer_.data(), {per_rank, sample_tokens}, torch::kInt64).to(device_);
  const double denominator = static_cast<double>(config_.global_train_batch_size * seq_len_);

  const auto compute_start = std::chrono::steady_clock::now();
  const double waited_before = peer_waits_->waited_seconds();
  parameters_->BeginStep();
  auto loss_sum = torch::zeros({1}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  for (int64_t m = 0; m < per_rank / micro; ++m) {
    // Dropout draws from (seed, step, rank, microbatch): resumption replays it exactly.
    torch::manual_seed(DeterministicRandom::Mix(
        DeterministicRandom::Mix(config_.seed, static_cast<uint64_t>(step_)),
        static_cast<uint64_t>(ctx_.rank * 4096 + m)));
    auto rows = batch.narrow(0, m * micro, micro);
    auto inputs = rows.narrow(1, 0, seq_len_);
    auto labels = rows.narrow(1, 1, seq_len_);
    // An MoE's load-balancing loss weighs in as much as the micro-batch's share of the tokens.
    model_->SetLoadBalancingScale(config_.model.moe_loss_weight *
                                  static_cast<double>(micro * seq_len_) / denominator);
    auto loss = model_->LossSum(inputs, labels);
    (loss / denominator).backward();
    parameters_->MicrobatchDone();
    loss_sum += loss.detach().to(torch::kFloat64);
  }
  const DebugBadBatches::Harm harm = bad_batches_.HarmTo(step_ + 1, data_state_);  // test hooks
  if (harm == DebugBadBatches::Harm::kNan) {
    loss_sum.fill_(std::numeric_limits<double>::quiet_NaN());
  } else if (harm == DebugBadBatches::Harm::kSpike) {
    loss_sum.mul_(100);
  }
  // Less the waits for peers inside (FULL_SHARD's gathers and reductions): what this rank
  // computed, so that a slow node stands out against the ranks that wait for it.
  const double compute_seconds = std::max(
      0.0, std::chrono::duration<double>(std::chrono::steady_clock::now() - compute_start).count() -
               (peer_waits_->waited_seconds() - waited_before));
  groups_->world().AllReduceSum(loss_sum);
  torch::Tensor grad = parameters_->ReduceGradients();

  torch::NoGradGuard no_grad;
  // Every rank's gradients harmed alike, so their sum is: harm the sum.
  if (harm == DebugBadBatches::Harm::kNan) {
    grad.fill_(std::numeric_limits<float>::quiet_NaN());
  } else if (harm == DebugBadBatches::Harm::kSpike) {
    grad.mul_(100);
  }
  auto norm_sq = grad.norm().to(torch::kFloat64).square().view({1});
  groups_->shard_group().AllReduceSum(norm_sq);
  StepResult result;
  result.compute_seconds = compute_seconds;
  {
    // On a GPU the collectives were only queued: the rank blocks here, on its peers' part.
    PeerWaits::Scope wait(*peer_waits_);
    result.grad_norm = std::sqrt(norm_sq.to(torch::kCPU).item<double>());
  }
  if (config_.gradient_clipping > 0) {
    const double coef = std::min(1.0, config_.gradient_clipping / (result.grad_norm + 1e-6));
    if (coef < 1.0) grad.mul_(coef);
  }
  result.learning_rate = LearningRate(config_.optimizer, config_.scheduler, step_, total_steps_);
  optimizer_->Step(grad, result.learning_rate, step_ + 1);
  parameters_->ShardUpdated();
  {
    PeerWaits::Scope wait(*peer_waits_);
    result.loss = loss_sum.to(torch::kCPU).item<double>() / denominator;
  }
  ++step_;
  tokens_seen_ += config_.global_train_batch_size * seq_len_;
  data_state_ = dataset_->Advance(data_state_);
  return result;
}

absl::Status Trainer::Save(bool background) {
  if (!checkpoints_) return absl::OkStatus();
  return checkpoints_->Save(Position(), background);
}

absl::Status Trainer::Run() {
  if (step_ >= total_steps_) {
    // Said to the worker too, so that the run shows where it stands and what it resumed from.
    report_->AlreadyDone(step_);
    if (ctx_.rank == 0)
      spdlog::info("already trained {} of {} steps: nothing to do", step_, total_steps_);
    return absl::OkStatus();
  }
  const int64_t save_every = config_.save_interval.Batches(dataset_->batches_per_epoch());
  const int64_t memory_every =
      checkpoints_ && checkpoints_->keeps_memory()
          ? config_.memory_checkpoint_interval.Batches(dataset_->batches_per_epoch())
          : 0;
  report_->SetCheckpointInterval(checkpoints_ ? std::max<int64_t>(0, save_every) : 0);
  // A test hook: stop (SIGSTOP) right after this step, once its save is durable, so that a test
  // can SIGKILL every rank at a known step.
  const int64_t stop_after = DebugStep("TESSERA_DEBUG_STOP_AFTER_STEP");
  report_->Start(step_);
  while (step_ < total_steps_) {
    const auto start = std::chrono::steady_clock::now();
    data_state_ = rollback_.SkipFrom(data_state_, *dataset_);
    const DataState batch = data_state_;
    TESSERA_ASSIGN_OR_RETURN(const StepResult result, Step());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (const std::string bad = rollback_.Judge(result.loss); !bad.empty()) {
      TESSERA_RETURN_IF_ERROR(RollBack(batch, result.loss, bad));
      continue;
    }
    rollback_.Record(result.loss);
    if (checkpoints_) report_->Committed(checkpoints_->last_committed_step());
    report_->StepDone(step_, result, seconds);
    if (save_every > 0 && step_ % save_every == 0 && step_ < total_steps_) {
      const auto before = std::chrono::steady_clock::now();
      TESSERA_RETURN_IF_ERROR(Save(/*background=*/true));
      report_->Saved(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count());
    }
    if (memory_every > 0 && step_ % memory_every == 0 && step_ < total_steps_) {
      checkpoints_->SnapshotInMemory(Position());
    }
    if (step_ == stop_after) {
      if (checkpoints_) TESSERA_RETURN_IF_ERROR(checkpoints_->Wait());
      std::fflush(nullptr);
      ::raise(SIGSTOP);
    }
  }
  if (checkpoints_) {
    if (checkpoints_->last_saved_step() != step_) {
      TESSERA_RETURN_IF_ERROR(Save(/*background=*/false));
    }
    TESSERA_RETURN_IF_ERROR(checkpoints_->Wait());
  }
  groups_->world().Barrier();  // rank 0 serves the store: it leaves last
  if (ctx_.rank == 0) LogFinish();
  return absl::OkStatus();
}

void Trainer::LogFinish() {
  spdlog::info("training finished: {} steps, {} tokens", step_, tokens_seen_);
  if (const torch::Tensor balance = model_->LoadBalancingLoss(); balance.defined()) {
    // How rank 0's last micro-batch spread over the experts: a collapsed router shows here.
    std::vector<std::string> blocks;
    for (int64_t b = 0; b < model_->block_count(); ++b) {
      const torch::Tensor counts = model_->block(b).tokens_per_expert().to(torch::kCPU);
      const int64_t* n = counts.data_ptr<int64_t>();
      blocks.push_back(absl::StrJoin(n, n + counts.numel(), " "));
    }
    spdlog::info(
        "mixture of experts at the last step: load-balancing loss {:.4f}; tokens per expert of "
        "rank 0's last micro-batch, block by block: {}",
        balance.item<double>(), absl::StrJoin(blocks, "; "));
  }
  // What a step gathers at most, to judge the peak by: the rest (embedding and final norm)
  // and the largest block.
  int64_t rest = 0, largest_block = 0;
  for (const ParameterUnit& unit : model_->ParameterUnits()) {
    int64_t bytes = 0;
    for (const auto& p : unit.parameters) bytes += p.numel() * p.element_size();
    (unit.block < 0 ? rest : largest_block) =
        std::max(unit.block < 0 ? rest : largest_block, bytes);
  }
  spdlog::info(
      "parameters held by rank 0 ({}): {} bytes between steps, at most {} during a step, of "
      "the model's {} (embedding and final norm {}, largest block {})",
      ShardingName(config_.sharding), parameters_->held_bytes(), parameters_->peak_held_bytes(),
      parameters_->numel() * 4, rest, largest_block);
}

}  // namespace tessera::engine
