#pragma once
// The checkpoint CommitChannel over the job's c10d TCPStore: a writing rank sets
// "ckpt/STEP/shard/I" to its shard record; the committing rank polls for it. The channel owns its
// own client connection, so the saver's thread never waits behind the training thread.

#include "worker/engine/checkpoint/checkpoint_saver.h"
#include "worker/engine/dist/communicator.h"

namespace tessera::engine {

class StoreCommitChannel final : public CommitChannel {
 public:
  explicit StoreCommitChannel(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  absl::Status Publish(int64_t step, const ShardRecord& record) override;
  absl::StatusOr<ShardRecord> Await(int64_t step, int index, absl::Duration timeout) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace tessera::engine
