#include "worker/engine/train/train_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "worker/engine/common/content_hash.h"
#include "worker/engine/train/config_field_reader.h"

namespace tessera::engine {
namespace {

struct Preset {
  const char* name;
  int64_t d_model, n_heads, n_layers, max_seq_len;
  int64_t moe_num_experts = 0, moe_top_k = 0;
};
// MPT-style shapes; vocab comes from the dataset. dbrx-small is DBRX's routing (16 experts, each
// token to 4) at a size a CPU machine trains.
constexpr Preset kPresets[] = {{"tiny", 64, 4, 2, 64},
                               {"125m", 768, 12, 12, 2048},
                               {"350m", 1024, 16, 24, 2048},
                               {"1b", 2048, 16, 24, 2048},
                               {"7b", 4096, 32, 32, 2048},
                               {"moe-tiny", 64, 4, 2, 64, 8, 2},
                               {"dbrx-small", 256, 8, 4, 512, 16, 4}};

// model: its preset, sizes and mixture of experts, checked together.
absl::Status ReadModel(const YAML::Node& root, const FieldReader& r, TrainConfig& c) {
  if (const YAML::Node m = root["model"]; m.IsDefined() && !m.IsNull()) {
    TESSERA_RETURN_IF_ERROR(
        r.OnlyKnown(m, "model",
                    {"preset", "d_model", "n_heads", "n_layers", "max_seq_len", "vocab_size",
                     "mlp_ratio", "dropout", "init_std", "moe_num_experts", "moe_top_k",
                     "moe_loss_weight", "moe_world_size"}));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "preset", "model", &c.model.preset));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "d_model", "model", &c.model.d_model));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "n_heads", "model", &c.model.n_heads));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "n_layers", "model", &c.model.n_layers));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "max_seq_len", "model", &c.model.max_seq_len));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "vocab_size", "model", &c.model.vocab_size));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "mlp_ratio", "model", &c.model.mlp_ratio));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "dropout", "model", &c.model.dropout));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "init_std", "model", &c.model.init_std));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "moe_num_experts", "model", &c.model.moe_num_experts));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "moe_top_k", "model", &c.model.moe_top_k));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "moe_loss_weight", "model", &c.model.moe_loss_weight));
    TESSERA_RETURN_IF_ERROR(r.Read(m, "moe_world_size", "model", &c.model.moe_world_size));
    if (c.model.moe_world_size < 1) {
      return r.Error(m["moe_world_size"], "model.moe_world_size", "must be positive");
    }
    if (c.model.moe_num_experts < 0) {
      return r.Error(m["moe_num_experts"], "model.moe_num_experts", "must be 0 (dense) or more");
    }
    if (c.model.moe_top_k < 0)
      return r.Error(m["moe_top_k"], "model.moe_top_k", "must be positive");
    if (c.model.moe_loss_weight < 0) {
      return r.Error(m["moe_loss_weight"], "model.moe_loss_weight", "must be 0 or more");
    }
    for (const char* k : {"d_model", "n_heads", "n_layers", "max_seq_len", "vocab_size"}) {
      int64_t v = 0;
      TESSERA_RETURN_IF_ERROR(r.Read(m, k, "model", &v));
      TESSERA_RETURN_IF_ERROR(r.Positive(m, k, "model", static_cast<double>(v), true));
    }
    TESSERA_RETURN_IF_ERROR(r.Positive(m, "mlp_ratio", "model", c.model.mlp_ratio, false));
    TESSERA_RETURN_IF_ERROR(r.Positive(m, "init_std", "model", c.model.init_std, false));
    if (c.model.dropout < 0 || c.model.dropout >= 1) {
      return r.Error(m["dropout"], "model.dropout", "must be in [0, 1)");
    }
  }
  if (auto st = ApplyModelPreset(c.model); !st.ok()) {
    return r.Error(root["model"]["preset"], "model.preset", std::string(st.message()).substr(14));
  }
  if (c.model.moe_top_k > 0 && !c.model.is_moe()) {
    return r.Error(root["model"]["moe_top_k"], "model.moe_top_k",
                   "needs moe_num_experts (the model is dense)");
  }
  if (c.model.moe_top_k > c.model.moe_num_experts) {
    // The preset's k may be what is too many: then the model's line.
    const YAML::Node top_k = root["model"]["moe_top_k"];
    return r.Error(top_k.IsDefined() ? top_k : root["model"], "model.moe_top_k",
                   absl::StrCat(c.model.moe_top_k, " is more than moe_num_experts (",
                                c.model.moe_num_experts, ")"));
  }
  if (c.model.moe_world_size > 1 && !c.model.is_moe()) {
    return r.Error(root["model"]["moe_world_size"], "model.moe_world_size",
                   "needs moe_num_experts (the model is dense)");
  }
  if (c.model.is_moe() && c.model.moe_num_experts % c.model.moe_world_size != 0) {
    return r.Error(root["model"]["moe_world_size"], "model.moe_world_size",
                   absl::StrCat(c.model.moe_world_size, " does not divide moe_num_experts (",
                                c.model.moe_num_experts, ")"));
  }
  if (c.model.d_model % c.model.n_heads != 0) {
    return r.Error(
        root["model"], "model.d_model",
        absl::StrCat(c.model.d_model, " is not a multiple of n_heads (", c.model.n_heads, ")"));
  }
  return absl::OkStatus();
}

// data: the converted dataset and how it is shuffled (as Streaming).
absl::Status ReadData(const YAML::Node& root, const FieldReader& r, TrainConfig& c) {
  const YAML::Node d = root["data"];
  if (!d.IsDefined() || d.IsNull()) {
    return r.Error(root, "data", "required (data.path: a folder written by tessera-data convert)");
  }
  TESSERA_RETURN_IF_ERROR(r.OnlyKnown(
      d, "data", {"path", "shuffle", "shuffle_seed", "num_canonical_nodes", "shuffle_block_size"}));
  TESSERA_RETURN_IF_ERROR(r.Read(d, "path", "data", &c.data_path));
  if (c.data_path.empty()) return r.Error(d, "data.path", "required");
  TESSERA_RETURN_IF_ERROR(r.Read(d, "shuffle", "data", &c.shuffle.shuffle));
  TESSERA_RETURN_IF_ERROR(r.Read(d, "shuffle_seed", "data", &c.shuffle.seed));
  TESSERA_RETURN_IF_ERROR(r.Read(d, "num_canonical_nodes", "data", &c.shuffle.num_canonical_nodes));
  TESSERA_RETURN_IF_ERROR(r.Positive(d, "num_canonical_nodes", "data",
                                     static_cast<double>(c.shuffle.num_canonical_nodes), false));
  TESSERA_RETURN_IF_ERROR(r.Read(d, "shuffle_block_size", "data", &c.shuffle.shuffle_block_size));
  TESSERA_RETURN_IF_ERROR(r.Positive(d, "shuffle_block_size", "data",
                                     static_cast<double>(c.shuffle.shuffle_block_size), false));
  return absl::OkStatus();
}

// optimizer and scheduler: AdamW and cosine with warmup, as Composer names them.
absl::Status ReadOptimization(const YAML::Node& root, const FieldReader& r, TrainConfig& c) {
  if (const YAML::Node o = root["optimizer"]; o.IsDefined() && !o.IsNull()) {
    TESSERA_RETURN_IF_ERROR(
        r.OnlyKnown(o, "optimizer", {"name", "lr", "betas", "eps", "weight_decay"}));
    std::string name = "decoupled_adamw";
    TESSERA_RETURN_IF_ERROR(r.Read(o, "name", "optimizer", &name));
    if (name != "decoupled_adamw" && name != "adamw") {
      return r.Error(o["name"], "optimizer.name", "must be adamw (decoupled_adamw)");
    }
    TESSERA_RETURN_IF_ERROR(r.Read(o, "lr", "optimizer", &c.optimizer.lr));
    TESSERA_RETURN_IF_ERROR(r.Positive(o, "lr", "optimizer", c.optimizer.lr, false));
    TESSERA_RETURN_IF_ERROR(r.Read(o, "eps", "optimizer", &c.optimizer.eps));
    TESSERA_RETURN_IF_ERROR(r.Positive(o, "eps", "optimizer", c.optimizer.eps, false));
    TESSERA_RETURN_IF_ERROR(r.Read(o, "weight_decay", "optimizer", &c.optimizer.weight_decay));
    TESSERA_RETURN_IF_ERROR(
        r.Positive(o, "weight_decay", "optimizer", c.optimizer.weight_decay, true));
    if (const YAML::Node b = o["betas"]; b.IsDefined()) {
      double b1 = 0, b2 = 0;
      if (!b.IsSequence() || b.size() != 2 || !absl::SimpleAtod(b[0].as<std::string>(""), &b1) ||
          !absl::SimpleAtod(b[1].as<std::string>(""), &b2) || b1 < 0 || b1 >= 1 || b2 < 0 ||
          b2 >= 1) {
        return r.Error(b, "optimizer.betas", "must be two numbers in [0, 1), like [0.9, 0.95]");
      }
      c.optimizer.beta1 = b1;
      c.optimizer.beta2 = b2;
    }
  }
  if (const YAML::Node s = root["scheduler"]; s.IsDefined() && !s.IsNull()) {
    TESSERA_RETURN_IF_ERROR(r.OnlyKnown(s, "scheduler", {"name", "t_warmup", "alpha_f"}));
    std::string name = "cosine_with_warmup";
    TESSERA_RETURN_IF_ERROR(r.Read(s, "name", "scheduler", &name));
    if (name != "cosine_with_warmup") {
      return r.Error(s["name"], "scheduler.name", "must be cosine_with_warmup");
    }
    TrainDuration warmup;
    TESSERA_RETURN_IF_ERROR(r.ReadDuration(s, "t_warmup", &warmup, /*batches_only=*/true));
    c.scheduler.warmup_batches = warmup.value;
    TESSERA_RETURN_IF_ERROR(r.Read(s, "alpha_f", "scheduler", &c.scheduler.alpha_f));
    if (c.scheduler.alpha_f < 0 || c.scheduler.alpha_f > 1) {
      return r.Error(s["alpha_f"], "scheduler.alpha_f", "must be in [0, 1]");
    }
  }
  return absl::OkStatus();
}

// loss_rollback: when a NaN or a spike sends the run back to a checkpoint.
absl::Status ReadLossRollback(const YAML::Node& root, const FieldReader& r, TrainConfig& c) {
  if (const YAML::Node b = root["loss_rollback"]; b.IsDefined() && !b.IsNull()) {
    if (!b.IsMap()) return r.Error(b, "loss_rollback", "must be a map");
    TESSERA_RETURN_IF_ERROR(
        r.OnlyKnown(b, "loss_rollback", {"on_nan", "spike_factor", "window", "max_rollbacks"}));
    auto& l = c.loss_rollback;
    TESSERA_RETURN_IF_ERROR(r.Read(b, "on_nan", "loss_rollback", &l.on_nan));
    TESSERA_RETURN_IF_ERROR(r.Read(b, "spike_factor", "loss_rollback", &l.spike_factor));
    if (l.spike_factor != 0 && l.spike_factor <= 1) {
      return r.Error(b["spike_factor"], "loss_rollback.spike_factor",
                     "must be above 1 (a multiple of the recent median loss), or 0 for none");
    }
    TESSERA_RETURN_IF_ERROR(r.Read(b, "window", "loss_rollback", &l.window));
    TESSERA_RETURN_IF_ERROR(r.Positive(b, "window", "loss_rollback", l.window, false));
    TESSERA_RETURN_IF_ERROR(r.Read(b, "max_rollbacks", "loss_rollback", &l.max_rollbacks));
    TESSERA_RETURN_IF_ERROR(
        r.Positive(b, "max_rollbacks", "loss_rollback", l.max_rollbacks, false));
  }
  return absl::OkStatus();
}

// fsdp: the sharding strategy and activation checkpointing (as Composer's fsdp_config).
absl::Status ReadFsdp(const YAML::Node& root, const FieldReader& r, TrainConfig& c) {
  if (const YAML::Node f = root["fsdp"]; f.IsDefined() && !f.IsNull()) {
    TESSERA_RETURN_IF_ERROR(
        r.OnlyKnown(f, "fsdp",
                    {"sharding_strategy", "shard_group_size", "activation_checkpointing",
                     "activation_checkpointing_interval"}));
    std::string strategy = "FULL_SHARD";
    TESSERA_RETURN_IF_ERROR(r.Read(f, "sharding_strategy", "fsdp", &strategy));
    if (strategy == "FULL_SHARD")
      c.sharding = Sharding::kFullShard;
    else if (strategy == "SHARD_GRAD_OP")
      c.sharding = Sharding::kShardGradOp;
    else if (strategy == "HYBRID_SHARD")
      c.sharding = Sharding::kHybridShard;
    else if (strategy == "NO_SHARD")
      c.sharding = Sharding::kNoShard;
    else {
      return r.Error(f["sharding_strategy"], "fsdp.sharding_strategy",
                     "must be FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD or NO_SHARD");
    }
    TESSERA_RETURN_IF_ERROR(r.Read(f, "shard_group_size", "fsdp", &c.shard_group_size));
    TESSERA_RETURN_IF_ERROR(r.Positive(f, "shard_group_size", "fsdp", c.shard_group_size, true));
    // As Composer's fsdp_config: activation_checkpointing: true checkpoints every block; the
    // interval thins that to every k-th.
    bool checkpointing = false;
    TESSERA_RETURN_IF_ERROR(r.Read(f, "activation_checkpointing", "fsdp", &checkpointing));
    int interval = 1;
    TESSERA_RETURN_IF_ERROR(r.Read(f, "activation_checkpointing_interval", "fsdp", &interval));
    TESSERA_RETURN_IF_ERROR(
        r.Positive(f, "activation_checkpointing_interval", "fsdp", interval, false));
    if (f["activation_checkpointing_interval"].IsDefined() && !checkpointing) {
      return r.Error(f["activation_checkpointing_interval"],
                     "fsdp.activation_checkpointing_interval",
                     "needs fsdp.activation_checkpointing: true");
    }
    c.activation_checkpointing_interval = checkpointing ? interval : 0;
  }
  return absl::OkStatus();
}

// save_*, autoresume: where, how often and how many checkpoints.
absl::Status ReadCheckpointing(const YAML::Node& root, const FieldReader& r, TrainConfig& c) {
  TESSERA_RETURN_IF_ERROR(r.Read(root, "save_folder", "", &c.save_folder));
  TESSERA_RETURN_IF_ERROR(r.ReadDuration(root, "save_interval", &c.save_interval));
  TESSERA_RETURN_IF_ERROR(
      r.ReadDuration(root, "memory_checkpoint_interval", &c.memory_checkpoint_interval));
  TESSERA_RETURN_IF_ERROR(r.Read(root, "num_checkpoints_to_keep", "", &c.num_checkpoints_to_keep));
  TESSERA_RETURN_IF_ERROR(
      r.Read(root, "save_num_checkpoints_to_keep", "", &c.num_checkpoints_to_keep));
  TESSERA_RETURN_IF_ERROR(
      r.Positive(root, "num_checkpoints_to_keep", "", c.num_checkpoints_to_keep, true));
  TESSERA_RETURN_IF_ERROR(r.Read(root, "save_in_background", "", &c.save_in_background));
  TESSERA_RETURN_IF_ERROR(r.Read(root, "autoresume", "", &c.autoresume));
  TESSERA_RETURN_IF_ERROR(
      r.Read(root, "save_commit_timeout_seconds", "", &c.save_commit_timeout_seconds));
  TESSERA_RETURN_IF_ERROR(
      r.Positive(root, "save_commit_timeout_seconds", "", c.save_commit_timeout_seconds, false));
  if (c.loss_rollback.enabled() && (c.save_folder.empty() || c.save_interval.value <= 0)) {
    return r.Error(
        root["loss_rollback"], "loss_rollback",
        "needs a save_folder and a save_interval (a rollback goes back to a checkpoint)");
  }
  if (c.save_interval.value > 0 && c.save_folder.empty()) {
    return r.Error(root["save_interval"], "save_interval", "needs a save_folder");
  }
  if (c.memory_checkpoint_interval.value > 0 && c.save_folder.empty()) {
    return r.Error(root["memory_checkpoint_interval"], "memory_checkpoint_interval",
                   "needs a save_folder (a snapshot recovered from memory is committed there)");
  }
  return absl::OkStatus();
}

}  // namespace

std::string TrainDuration::ToString() const {
  return absl::StrCat(value, unit == Unit::kBatches ? "ba" : "ep");
}

absl::StatusOr<TrainDuration> ParseTrainDuration(const std::string& text) {
  const std::string t(absl::StripAsciiWhitespace(text));
  TrainDuration d;
  std::string number;
  if (absl::EndsWith(t, "ba")) {
    number = t.substr(0, t.size() - 2);
  } else if (absl::EndsWith(t, "ep")) {
    number = t.substr(0, t.size() - 2);
    d.unit = TrainDuration::Unit::kEpochs;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a duration: use batches (50ba) or epochs (2ep)"));
  }
  if (!absl::SimpleAtoi(number, &d.value) || d.value < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a duration: the count must be a whole number"));
  }
  return d;
}

absl::StatusOr<std::string> ExpandVariables(const std::string& text,
                                            const std::map<std::string, std::string>& env) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    if (text.compare(i, 2, "${") != 0) {
      out.push_back(text[i++]);
      continue;
    }
    const size_t end = text.find('}', i + 2);
    if (end == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\": ${ without a closing }"));
    }
    const std::string name = text.substr(i + 2, end - i - 2);
    auto it = env.find(name);
    if (it == env.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", text, "\": the environment variable ", name, " is not set"));
    }
    out += it->second;
    i = end + 1;
  }
  return out;
}

nlohmann::json ModelConfig::ToJson() const {
  return {{"preset", preset},           {"d_model", d_model},
          {"n_heads", n_heads},         {"n_layers", n_layers},
          {"max_seq_len", max_seq_len}, {"vocab_size", vocab_size},
          {"mlp_ratio", mlp_ratio},     {"dropout", dropout},
          {"init_std", init_std},       {"moe_num_experts", moe_num_experts},
          {"moe_top_k", moe_top_k},     {"moe_loss_weight", moe_loss_weight}};
}

std::string ModelConfig::ShapeHash() const {
  return HashBytes(absl::StrCat("gpt-alibi/v1 d_model=", d_model, " n_heads=", n_heads,
                                " n_layers=", n_layers, " vocab=", vocab_size,
                                " mlp_hidden=", static_cast<int64_t>(mlp_ratio * d_model),
                                // Dense models keep the hash their checkpoints were written with.
                                is_moe() ? absl::StrCat(" experts=", moe_num_experts) : ""));
}

absl::Status ApplyModelPreset(ModelConfig& m) {
  for (const auto& p : kPresets) {
    if (m.preset != p.name) continue;
    if (m.d_model == 0) m.d_model = p.d_model;
    if (m.n_heads == 0) m.n_heads = p.n_heads;
    if (m.n_layers == 0) m.n_layers = p.n_layers;
    if (m.max_seq_len == 0) m.max_seq_len = p.max_seq_len;
    if (m.moe_num_experts == 0) m.moe_num_experts = p.moe_num_experts;
    if (m.moe_top_k == 0)
      m.moe_top_k = m.moe_num_experts > 0 ? std::max<int64_t>(p.moe_top_k, 1) : 0;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model.preset: must be tiny, 125m, 350m, 1b, 7b, moe-tiny or dbrx-small, not \"",
                   m.preset, "\""));
}

std::string ShardingName(Sharding s) {
  switch (s) {
    case Sharding::kFullShard:
      return "FULL_SHARD";
    case Sharding::kShardGradOp:
      return "SHARD_GRAD_OP";
    case Sharding::kHybridShard:
      return "HYBRID_SHARD";
    case Sharding::kNoShard:
      return "NO_SHARD";
  }
  return "?";
}

absl::StatusOr<TrainConfig> ParseTrainConfig(const std::string& text, const std::string& source,
                                             const std::map<std::string, std::string>& env) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", e.mark.line + 1, ": not valid YAML: ", e.msg));
  }
  FieldReader r(source, env);
  if (!root.IsDefined() || root.IsNull()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the configuration is empty"));
  }
  TESSERA_RETURN_IF_ERROR(r.OnlyKnown(root, "",
                                      {"model",
                                       "data",
                                       "optimizer",
                                       "scheduler",
                                       "max_duration",
                                       "global_train_batch_size",
                                       "device_train_microbatch_size",
                                       "gradient_clipping",
                                       "loss_rollback",
                                       "precision",
                                       "seed",
                                       "fsdp",
                                       "save_folder",
                                       "save_interval",
                                       "memory_checkpoint_interval",
                                       "num_checkpoints_to_keep",
                                       "save_num_checkpoints_to_keep",
                                       "save_in_background",
                                       "autoresume",
                                       "save_commit_timeout_seconds",
                                       "log_interval",
                                       "threads",
                                       "device"}));
  TrainConfig c;
  TESSERA_RETURN_IF_ERROR(ReadModel(root, r, c));
  TESSERA_RETURN_IF_ERROR(ReadData(root, r, c));
  TESSERA_RETURN_IF_ERROR(ReadOptimization(root, r, c));
  TESSERA_RETURN_IF_ERROR(r.ReadDuration(root, "max_duration", &c.max_duration));
  if (c.max_duration.value <= 0)
    return r.Error(root["max_duration"], "max_duration", "must be positive");
  TESSERA_RETURN_IF_ERROR(r.Read(root, "global_train_batch_size", "", &c.global_train_batch_size));
  TESSERA_RETURN_IF_ERROR(r.Positive(root, "global_train_batch_size", "",
                                     static_cast<double>(c.global_train_batch_size), false));
  TESSERA_RETURN_IF_ERROR(
      r.Read(root, "device_train_microbatch_size", "", &c.device_train_microbatch_size));
  TESSERA_RETURN_IF_ERROR(r.Positive(root, "device_train_microbatch_size", "",
                                     static_cast<double>(c.device_train_microbatch_size), true));
  TESSERA_RETURN_IF_ERROR(r.Read(root, "gradient_clipping", "", &c.gradient_clipping));
  TESSERA_RETURN_IF_ERROR(r.Positive(root, "gradient_clipping", "", c.gradient_clipping, true));
  TESSERA_RETURN_IF_ERROR(ReadLossRollback(root, r, c));
  TESSERA_RETURN_IF_ERROR(r.Read(root, "precision", "", &c.precision));
  if (c.precision != "fp32" && c.precision != "amp_bf16") {
    return r.Error(root["precision"], "precision", "must be fp32 or amp_bf16");
  }
  TESSERA_RETURN_IF_ERROR(r.Read(root, "seed", "", &c.seed));
  TESSERA_RETURN_IF_ERROR(ReadFsdp(root, r, c));
  TESSERA_RETURN_IF_ERROR(ReadCheckpointing(root, r, c));
  if (const YAML::Node l = root["log_interval"]; l.IsDefined() && !l.IsNull()) {
    TrainDuration li{1, TrainDuration::Unit::kBatches};
    if (l.IsScalar() && absl::SimpleAtoi(l.Scalar(), &li.value)) {
    } else {
      TESSERA_RETURN_IF_ERROR(r.ReadDuration(root, "log_interval", &li, /*batches_only=*/true));
    }
    if (li.value <= 0) return r.Error(l, "log_interval", "must be positive");
    c.log_interval = li.value;
  }
  TESSERA_RETURN_IF_ERROR(r.Read(root, "threads", "", &c.threads));
  TESSERA_RETURN_IF_ERROR(r.Positive(root, "threads", "", c.threads, true));
  TESSERA_RETURN_IF_ERROR(r.Read(root, "device", "", &c.device));
  if (c.device != "auto" && c.device != "cpu" && c.device != "cuda") {
    return r.Error(root["device"], "device", "must be auto, cpu or cuda");
  }
  return c;
}

}  // namespace tessera::engine
