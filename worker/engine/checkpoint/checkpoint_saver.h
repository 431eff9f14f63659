#pragma once
// Saves sharded checkpoints. Each writing rank writes its shard durably and announces it on a
// CommitChannel; the committing rank (rank 0) waits for every shard, then writes the manifest
// (the commit) and prunes old steps. So a step is committed only after every shard is on disk.
//
// In background mode Save copies the shard into memory the saver owns (the only time training
// waits) and writes it on a thread while training goes on; the next Save first waits for it.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/engine/checkpoint/checkpoint_folder.h"
#include "worker/engine/checkpoint/shard_file.h"

namespace tessera::engine {

// How writing ranks tell the committing rank that their shard is durable.
class CommitChannel {
 public:
  virtual ~CommitChannel() = default;
  virtual absl::Status Publish(int64_t step, const ShardRecord& record) = 0;
  virtual absl::StatusOr<ShardRecord> Await(int64_t step, int index, absl::Duration timeout) = 0;
};

std::string EncodeShardRecord(const ShardRecord& record);
absl::StatusOr<ShardRecord> DecodeShardRecord(const std::string& text);

// For ranks that are threads of one process (tests).
class InProcessCommitChannel final : public CommitChannel {
 public:
  absl::Status Publish(int64_t step, const ShardRecord& record) override;
  absl::StatusOr<ShardRecord> Await(int64_t step, int index, absl::Duration timeout) override;

 private:
  absl::Mutex mu_;
  std::vector<std::pair<int64_t, ShardRecord>> published_ ABSL_GUARDED_BY(mu_);
};

struct SaveRole {
  bool writes_shard = true;  // false for replicas other than the first under hybrid sharding
  int shard_index = 0;
  int shard_count = 1;
  bool commits = false;  // rank 0
};

struct SaveJob {
  CheckpointManifest manifest;  // everything but `shards`, which the saver fills in
  ShardPayload payload;         // this rank's shard, in training memory
};

class CheckpointSaver {
 public:
  CheckpointSaver(CheckpointFolder folder, CommitChannel* channel, SaveRole role, int keep,
                  absl::Duration commit_timeout);
  ~CheckpointSaver();

  // Saves `job`. Returns the error of an earlier background save, if it failed.
  absl::Status Save(const SaveJob& job, bool background);
  // Waits for a background save; returns its result.
  absl::Status Wait();

  // How long the last Save call kept its caller waiting.
  absl::Duration last_blocked() const { return last_blocked_; }
  // The newest step this rank committed (committing rank only), -1 before the first.
  int64_t last_committed_step() const;

 private:
  absl::Status Run(CheckpointManifest manifest, ShardPayload payload);

  CheckpointFolder folder_;
  CommitChannel* channel_;
  SaveRole role_;
  int keep_;
  absl::Duration commit_timeout_;
  std::thread thread_;
  absl::Status background_status_;
  std::vector<std::vector<float>> copies_;  // reused between saves: no page faults each time
  absl::Duration last_blocked_;
  mutable absl::Mutex mu_;
  int64_t last_committed_ ABSL_GUARDED_BY(mu_) = -1;
};

}  // namespace tessera::engine
