#include "worker/engine/checkpoint/manifest.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tessera::engine {
namespace {

absl::Status Bad(const std::string& source, const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", field, ": ", what));
}

template <typename T>
absl::StatusOr<T> Get(const nlohmann::json& j, const std::string& key, const std::string& source,
                      const std::string& prefix = "") {
  if (!j.contains(key)) return Bad(source, prefix + key, "required");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    return Bad(source, prefix + key, "has the wrong type: " + j.at(key).dump());
  }
}

}  // namespace

nlohmann::json CheckpointManifest::ToJson() const {
  nlohmann::json shard_list = nlohmann::json::array();
  for (const auto& s : shards) {
    shard_list.push_back({{"index", s.index},
                          {"file", s.file},
                          {"offset", s.offset},
                          {"count", s.count},
                          {"bytes", s.bytes},
                          {"xxh3_128", s.hash}});
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const DataState& d : skipped_batches) {
    skipped.push_back({{"epoch", d.epoch}, {"sample_in_epoch", d.sample_in_epoch}});
  }
  return {{"format", "tessera-checkpoint"},
          {"version", 1},
          {"step", step},
          {"world_size", world_size},
          {"sharding", sharding},
          {"shard_group_size", shard_group_size},
          {"numel", numel},
          {"arrays", arrays},
          {"shards", shard_list},
          {"data", {{"epoch", data.epoch}, {"sample_in_epoch", data.sample_in_epoch}}},
          {"tokens_seen", tokens_seen},
          {"loss_rollbacks", loss_rollbacks},
          {"skipped_batches", skipped},
          {"rng", {{"seed", seed}, {"policy", "per-step: seed, step and rank"}}},
          {"config_hash", config_hash},
          {"model", model},
          {"saved_at", saved_at}};
}

absl::StatusOr<CheckpointManifest> CheckpointManifest::FromJson(const nlohmann::json& j,
                                                                const std::string& source) {
  TESSERA_ASSIGN_OR_RETURN(CheckpointManifest m, PartFromJson(j, source));
  if (auto st = m.CheckCoverage(); !st.ok())
    return Bad(source, "shards", std::string(st.message()));
  return m;
}

absl::StatusOr<CheckpointManifest> CheckpointManifest::PartFromJson(const nlohmann::json& j,
                                                                    const std::string& source) {
  if (!j.is_object() || j.value("format", "") != "tessera-checkpoint") {
    return Bad(source, "format", "must be \"tessera-checkpoint\"");
  }
  if (j.value("version", 0) != 1) return Bad(source, "version", "only version 1 is known");
  CheckpointManifest m;
  TESSERA_ASSIGN_OR_RETURN(m.step, Get<int64_t>(j, "step", source));
  TESSERA_ASSIGN_OR_RETURN(m.world_size, Get<int>(j, "world_size", source));
  TESSERA_ASSIGN_OR_RETURN(m.sharding, Get<std::string>(j, "sharding", source));
  TESSERA_ASSIGN_OR_RETURN(m.shard_group_size, Get<int>(j, "shard_group_size", source));
  TESSERA_ASSIGN_OR_RETURN(m.numel, Get<int64_t>(j, "numel", source));
  TESSERA_ASSIGN_OR_RETURN(m.arrays, Get<std::vector<std::string>>(j, "arrays", source));
  if (!j.contains("shards") || !j["shards"].is_array()) return Bad(source, "shards", "required");
  for (size_t i = 0; i < j["shards"].size(); ++i) {
    const auto& s = j["shards"][i];
    const std::string p = absl::StrCat("shards[", i, "].");
    if (!s.is_object()) return Bad(source, absl::StrCat("shards[", i, "]"), "must be an object");
    ShardRecord r;
    TESSERA_ASSIGN_OR_RETURN(r.index, Get<int>(s, "index", source, p));
    TESSERA_ASSIGN_OR_RETURN(r.file, Get<std::string>(s, "file", source, p));
    if (r.file.empty() || r.file.find('/') != std::string::npos) {
      return Bad(source, p + "file", "must be a file name in the step's folder");
    }
    TESSERA_ASSIGN_OR_RETURN(r.offset, Get<int64_t>(s, "offset", source, p));
    TESSERA_ASSIGN_OR_RETURN(r.count, Get<int64_t>(s, "count", source, p));
    TESSERA_ASSIGN_OR_RETURN(r.bytes, Get<int64_t>(s, "bytes", source, p));
    TESSERA_ASSIGN_OR_RETURN(r.hash, Get<std::string>(s, "xxh3_128", source, p));
    m.shards.push_back(std::move(r));
  }
  if (!j.contains("data") || !j["data"].is_object()) return Bad(source, "data", "required");
  TESSERA_ASSIGN_OR_RETURN(m.data.epoch, Get<int64_t>(j["data"], "epoch", source, "data."));
  TESSERA_ASSIGN_OR_RETURN(m.data.sample_in_epoch,
                           Get<int64_t>(j["data"], "sample_in_epoch", source, "data."));
  TESSERA_ASSIGN_OR_RETURN(m.tokens_seen, Get<int64_t>(j, "tokens_seen", source));
  // Both absent from checkpoints written before rollbacks were: none.
  if (j.contains("loss_rollbacks")) {
    TESSERA_ASSIGN_OR_RETURN(m.loss_rollbacks, Get<int>(j, "loss_rollbacks", source));
  }
  if (j.contains("skipped_batches")) {
    if (!j["skipped_batches"].is_array()) return Bad(source, "skipped_batches", "must be a list");
    for (size_t i = 0; i < j["skipped_batches"].size(); ++i) {
      const auto& s = j["skipped_batches"][i];
      const std::string p = absl::StrCat("skipped_batches[", i, "].");
      if (!s.is_object()) {
        return Bad(source, absl::StrCat("skipped_batches[", i, "]"), "must be an object");
      }
      DataState d;
      TESSERA_ASSIGN_OR_RETURN(d.epoch, Get<int64_t>(s, "epoch", source, p));
      TESSERA_ASSIGN_OR_RETURN(d.sample_in_epoch, Get<int64_t>(s, "sample_in_epoch", source, p));
      m.skipped_batches.push_back(d);
    }
  }
  if (!j.contains("rng") || !j["rng"].is_object()) return Bad(source, "rng", "required");
  TESSERA_ASSIGN_OR_RETURN(m.seed, Get<uint64_t>(j["rng"], "seed", source, "rng."));
  TESSERA_ASSIGN_OR_RETURN(m.config_hash, Get<std::string>(j, "config_hash", source));
  m.model = j.value("model", nlohmann::json::object());
  m.saved_at = j.value("saved_at", "");
  if (m.step < 0 || m.world_size < 1 || m.shard_group_size < 1 || m.numel < 1 || m.arrays.empty()) {
    return Bad(source, "step/world_size/shard_group_size/numel/arrays", "out of range");
  }
  return m;
}

absl::Status CheckpointManifest::CheckCoverage() const {
  std::vector<ShardRecord> sorted = shards;
  std::sort(sorted.begin(), sorted.end(),
            [](const ShardRecord& a, const ShardRecord& b) { return a.offset < b.offset; });
  int64_t next = 0;
  for (const auto& s : sorted) {
    if (s.offset != next || s.count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", s.index, " starts at element ", s.offset, ", expected ", next));
    }
    next += s.count;
  }
  if (next != numel) {
    return absl::InvalidArgumentError(
        absl::StrCat("the shards cover ", next, " of ", numel, " elements"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::engine
