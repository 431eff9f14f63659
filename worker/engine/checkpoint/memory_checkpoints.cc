#include "worker/engine/checkpoint/memory_checkpoints.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/unique_fd.h"

namespace tessera::engine {
namespace fs = std::filesystem;
namespace {

constexpr char kShardSuffix[] = ".json";

// Snapshots are named as a save folder's steps are (CheckpointFolder::StepFolder).
std::string StepFolderIn(const std::string& root, int64_t step) {
  return CheckpointFolder(root).StepFolder(step);
}

std::optional<int64_t> SnapshotStepOf(const std::string& name) {
  constexpr absl::string_view kPrefix = "step-";
  int64_t step = 0;
  if (!absl::StartsWith(name, kPrefix) || !absl::SimpleAtoi(name.substr(kPrefix.size()), &step) ||
      step < 0) {
    return std::nullopt;
  }
  return step;
}

nlohmann::json ShardJson(const MemoryShard& shard) {
  return {{"shard_count", shard.shard_count}, {"manifest", shard.manifest.ToJson()}};
}

absl::StatusOr<MemoryShard> ShardFromJson(const nlohmann::json& j, const std::string& source) {
  MemoryShard shard;
  if (!j.is_object() || !j.contains("shard_count") || !j["shard_count"].is_number_integer() ||
      !j.contains("manifest")) {
    return absl::DataLossError(absl::StrCat(source, ": expected {shard_count, manifest}"));
  }
  shard.shard_count = j["shard_count"].get<int>();
  TESSERA_ASSIGN_OR_RETURN(shard.manifest, CheckpointManifest::PartFromJson(j["manifest"], source));
  if (shard.manifest.shards.size() != 1 || shard.shard_count < 1 ||
      shard.manifest.shards[0].index < 0 || shard.manifest.shards[0].index >= shard.shard_count) {
    return absl::DataLossError(
        absl::StrCat(source, ": expected one shard of ", shard.shard_count, " in the manifest"));
  }
  return shard;
}

// What every shard of one step must agree on: the manifest without its shards and the time
// each holder wrote its part.
std::string CommonPart(const CheckpointManifest& m) {
  nlohmann::json j = m.ToJson();
  j.erase("shards");
  j.erase("saved_at");
  return j.dump();
}

}  // namespace

absl::Status MemoryCheckpointStore::Put(const CheckpointManifest& manifest, int index,
                                        int shard_count, const ShardPayload& payload) const {
  const int64_t bytes = kShardHeaderBytes + static_cast<int64_t>(payload.arrays.size()) *
                                                payload.count * static_cast<int64_t>(sizeof(float));
  if (byte_limit_ > 0) {
    const int64_t used = BytesUsed();
    if (used + bytes > byte_limit_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "shard ", index, " of step ", manifest.step, " (", bytes, " bytes) would take ", folder_,
          " to ", used + bytes, " bytes, past its limit of ", byte_limit_,
          " (the worker's --memory-checkpoint-bytes)"));
    }
  }
  const std::string step_folder = StepFolderIn(folder_, manifest.step);
  TESSERA_RETURN_IF_ERROR(MakeFolders(step_folder));
  TESSERA_ASSIGN_OR_RETURN(
      const ShardRecord record,
      WriteShardFile(step_folder, index, shard_count, manifest.step, manifest.numel, payload));
  MemoryShard shard{manifest, shard_count};
  shard.manifest.shards = {record};
  return WriteFileDurably(step_folder + "/" + record.file + kShardSuffix, ShardJson(shard).dump());
}

void MemoryCheckpointStore::DropAllBut(const std::vector<int64_t>& keep) const {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder_, ec)) {
    const auto step = SnapshotStepOf(entry.path().filename().string());
    if (!step || std::find(keep.begin(), keep.end(), *step) != keep.end()) continue;
    std::error_code gone;
    fs::remove_all(entry.path(), gone);  // another rank of the node may be removing it too
  }
}

std::vector<MemoryShard> MemoryCheckpointStore::Inventory() const {
  std::vector<MemoryShard> shards;
  std::error_code ec;
  for (const auto& step_entry : fs::directory_iterator(folder_, ec)) {
    if (!SnapshotStepOf(step_entry.path().filename().string())) continue;
    std::error_code inner;
    for (const auto& entry : fs::directory_iterator(step_entry.path(), inner)) {
      const std::string path = entry.path().string();
      if (!absl::EndsWith(path, kShardSuffix)) continue;
      auto text = ReadWholeFile(path);
      absl::StatusOr<MemoryShard> shard = text.ok() ? [&]() -> absl::StatusOr<MemoryShard> {
        const auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
        return ShardFromJson(j, path);
      }()
          : absl::StatusOr<MemoryShard>(text.status());
      if (!shard.ok()) {
        spdlog::warn("in-memory checkpoint skipped: {}", std::string(shard.status().message()));
        continue;
      }
      shards.push_back(*std::move(shard));
    }
  }
  std::sort(shards.begin(), shards.end(), [](const MemoryShard& a, const MemoryShard& b) {
    return std::tie(b.manifest.step, a.manifest.shards[0].index) <
           std::tie(a.manifest.step, b.manifest.shards[0].index);
  });
  return shards;
}

std::string MemoryCheckpointStore::ShardPath(int64_t step, const std::string& file) const {
  return StepFolderIn(folder_, step) + "/" + file;
}

int64_t MemoryCheckpointStore::BytesUsed() const {
  int64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder_, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) {
      const auto size = it->file_size(size_error);
      if (!size_error) bytes += static_cast<int64_t>(size);
    }
  }
  return bytes;
}

std::optional<MemoryRecovery> ChooseMemoryCheckpoint(
    const std::vector<std::vector<MemoryShard>>& inventories, int64_t newer_than,
    const CheckpointFolder::Compatible& compatible, std::vector<std::string>* refused) {
  // Candidates: a step as one sharding wrote it (a step may have been written twice, by attempts
  // on different numbers of ranks); for each shard index, its first holder.
  struct Candidate {
    int shard_count = 0;
    std::map<int, std::pair<int, const MemoryShard*>> shards;  // index -> (holder, shard)
  };
  std::map<std::pair<int64_t, int>, Candidate, std::greater<>> candidates;
  for (size_t node = 0; node < inventories.size(); ++node) {
    for (const MemoryShard& shard : inventories[node]) {
      if (shard.manifest.step <= newer_than) continue;
      Candidate& c = candidates[{shard.manifest.step, shard.shard_count}];
      c.shard_count = shard.shard_count;
      c.shards.emplace(shard.manifest.shards[0].index,
                       std::make_pair(static_cast<int>(node), &shard));
    }
  }
  for (const auto& [key, c] : candidates) {
    const int64_t step = key.first;
    std::vector<int> missing;
    for (int i = 0; i < c.shard_count; ++i) {
      if (!c.shards.count(i)) missing.push_back(i);
    }
    if (!missing.empty()) {
      refused->push_back(absl::StrCat(
          "step ", step, " in memory: shard", missing.size() == 1 ? " " : "s ",
          absl::StrJoin(missing, ", "), " of ", c.shard_count, " on no node of this attempt"));
      continue;
    }
    MemoryRecovery recovery;
    recovery.manifest = c.shards.begin()->second.second->manifest;
    recovery.manifest.shards.clear();
    const std::string common = CommonPart(recovery.manifest);
    std::vector<std::pair<ShardRecord, int>> held;
    bool agree = true;
    for (const auto& [index, holder_shard] : c.shards) {
      agree = agree && CommonPart(holder_shard.second->manifest) == common;
      held.emplace_back(holder_shard.second->manifest.shards[0], holder_shard.first);
    }
    if (!agree) {
      refused->push_back(absl::StrCat("step ", step, " in memory: its ", c.shard_count,
                                      " shards disagree about the step (different attempts)"));
      continue;
    }
    std::sort(held.begin(), held.end(),
              [](const auto& a, const auto& b) { return a.first.offset < b.first.offset; });
    for (auto& [record, holder] : held) {
      recovery.manifest.shards.push_back(record);
      recovery.holders.push_back(holder);
    }
    if (auto st = recovery.manifest.CheckCoverage(); !st.ok()) {
      refused->push_back(absl::StrCat("step ", step, " in memory: ", st.message()));
      continue;
    }
    if (auto st = compatible(recovery.manifest); !st.ok()) {
      refused->push_back(absl::StrCat("step ", step, " in memory: ", st.message()));
      continue;
    }
    return recovery;
  }
  return std::nullopt;
}

std::string EncodeInventory(const std::vector<MemoryShard>& inventory) {
  nlohmann::json list = nlohmann::json::array();
  for (const MemoryShard& shard : inventory) list.push_back(ShardJson(shard));
  return list.dump();
}

absl::StatusOr<std::vector<MemoryShard>> DecodeInventory(const std::string& text) {
  std::vector<MemoryShard> inventory;
  if (text.empty()) return inventory;  // a rank that speaks for no node
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return absl::DataLossError("an in-memory checkpoint inventory: not a list");
  for (size_t i = 0; i < j.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(MemoryShard shard,
                             ShardFromJson(j[i], absl::StrCat("inventory entry ", i)));
    inventory.push_back(std::move(shard));
  }
  return inventory;
}

absl::Status CopyShardDurably(const std::string& from, const std::string& to_folder) {
  const std::string name = fs::path(from).filename().string();
  const std::string to = to_folder + "/" + name, tmp = to + ".tmp";
  std::error_code ec;
  fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  if (ec)
    return absl::UnavailableError(absl::StrCat("copying ", from, " to ", tmp, ": ", ec.message()));
  {
    UniqueFd fd(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
      return absl::UnavailableError(absl::StrCat(tmp, ": fsync: ", std::strerror(errno)));
    }
  }
  fs::rename(tmp, to, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("renaming ", tmp, ": ", ec.message()));
  return SyncFolder(to_folder);
}

}  // namespace tessera::engine
