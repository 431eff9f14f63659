#include "worker/engine/checkpoint/checkpoint_saver.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "base/status_macros.h"

namespace tessera::engine {

std::string EncodeShardRecord(const ShardRecord& r) {
  return nlohmann::json{{"index", r.index}, {"file", r.file},   {"offset", r.offset},
                        {"count", r.count}, {"bytes", r.bytes}, {"hash", r.hash}}
      .dump();
}

absl::StatusOr<ShardRecord> DecodeShardRecord(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  try {
    if (!j.is_discarded()) {
      ShardRecord r;
      r.index = j.at("index");
      r.file = j.at("file");
      r.offset = j.at("offset");
      r.count = j.at("count");
      r.bytes = j.at("bytes");
      r.hash = j.at("hash");
      return r;
    }
  } catch (const nlohmann::json::exception&) {
  }
  return absl::DataLossError("a shard announcement is not a shard record: " + text);
}

absl::Status InProcessCommitChannel::Publish(int64_t step, const ShardRecord& record) {
  absl::MutexLock lock(&mu_);
  published_.emplace_back(step, record);
  return absl::OkStatus();
}

absl::StatusOr<ShardRecord> InProcessCommitChannel::Await(int64_t step, int index,
                                                          absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  const ShardRecord* found = nullptr;
  auto ready = [&] {
    for (const auto& [s, r] : published_) {
      if (s == step && r.index == index) {
        found = &r;
        return true;
      }
    }
    return false;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("shard ", index, " of step ", step, " was not written in time"));
  }
  return *found;
}

CheckpointSaver::CheckpointSaver(CheckpointFolder folder, CommitChannel* channel, SaveRole role,
                                 int keep, absl::Duration commit_timeout)
    : folder_(std::move(folder)),
      channel_(channel),
      role_(role),
      keep_(keep),
      commit_timeout_(commit_timeout) {}

CheckpointSaver::~CheckpointSaver() { Wait().IgnoreError(); }

int64_t CheckpointSaver::last_committed_step() const {
  absl::MutexLock lock(&mu_);
  return last_committed_;
}

absl::Status CheckpointSaver::Wait() {
  if (thread_.joinable()) thread_.join();
  absl::Status st = background_status_;
  background_status_ = absl::OkStatus();
  return st;
}

absl::Status CheckpointSaver::Save(const SaveJob& job, bool background) {
  MonotonicClock clock;  // a wall-clock step must not show as time blocked
  const absl::Time start = clock.Now();
  TESSERA_RETURN_IF_ERROR(Wait());
  if (!background) {
    absl::Status st = Run(job.manifest, job.payload);
    last_blocked_ = clock.Now() - start;
    return st;
  }
  // Copy the shard: training may change its memory as soon as this returns.
  ShardPayload owned = job.payload;
  if (role_.writes_shard) {
    // One thread per array: a copy is bound by one core's memory bandwidth, not the machine's.
    copies_.resize(job.payload.arrays.size());
    std::vector<std::thread> copiers;
    for (size_t a = 0; a < job.payload.arrays.size(); ++a) {
      copies_[a].resize(static_cast<size_t>(job.payload.count));
      owned.arrays[a] = copies_[a].data();
      copiers.emplace_back([&, a] {
        std::memcpy(copies_[a].data(), job.payload.arrays[a],
                    static_cast<size_t>(job.payload.count) * sizeof(float));
      });
    }
    for (auto& t : copiers) t.join();
  }
  thread_ = std::thread([this, manifest = job.manifest, owned] {
    background_status_ = Run(manifest, owned);
    if (!background_status_.ok()) {
      spdlog::error("checkpoint: background save of step {} failed: {}", manifest.step,
                    background_status_.ToString());
    }
  });
  last_blocked_ = clock.Now() - start;
  return absl::OkStatus();
}

absl::Status CheckpointSaver::Run(CheckpointManifest manifest, ShardPayload payload) {
  const std::string folder = folder_.StepFolder(manifest.step);
  ShardRecord mine;
  if (role_.writes_shard) {
    TESSERA_RETURN_IF_ERROR(folder_.PrepareStep(manifest.step));
    TESSERA_ASSIGN_OR_RETURN(mine, WriteShardFile(folder, role_.shard_index, role_.shard_count,
                                                  manifest.step, manifest.numel, payload));
    if (!role_.commits) TESSERA_RETURN_IF_ERROR(channel_->Publish(manifest.step, mine));
  }
  if (!role_.commits) return absl::OkStatus();
  manifest.shards.clear();
  for (int i = 0; i < role_.shard_count; ++i) {
    if (role_.writes_shard && i == role_.shard_index) {
      manifest.shards.push_back(mine);
      continue;
    }
    auto record = channel_->Await(manifest.step, i, commit_timeout_);
    if (!record.ok()) {
      return absl::Status(
          record.status().code(),
          absl::StrCat("step ", manifest.step, " not committed: ", record.status().message()));
    }
    manifest.shards.push_back(*std::move(record));
  }
  std::sort(manifest.shards.begin(), manifest.shards.end(),
            [](const ShardRecord& a, const ShardRecord& b) { return a.offset < b.offset; });
  TESSERA_RETURN_IF_ERROR(manifest.CheckCoverage());
  TESSERA_RETURN_IF_ERROR(folder_.Commit(manifest));
  {
    absl::MutexLock lock(&mu_);
    last_committed_ = manifest.step;
  }
  spdlog::info("checkpoint: step {} committed in {}", manifest.step, folder);
  return folder_.Retain(keep_);
}

}  // namespace tessera::engine
