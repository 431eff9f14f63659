#pragma once
// The checkpoint CommitChannel over the job's c10d TCPStore: a writing rank sets
// "ckpt/STEP/shard/I" to its shard record; the committing rank polls for it. The channel owns its
// own client connection, so the saver's thread never waits behind the training thread. Awaiting a
// peer's shard is a wait on that peer (peer_waits.h): a rank 0 blocked on a hung peer's shard, in
// a final save, must not look hung itself.

#include "worker/engine/checkpoint/checkpoint_saver.h"
#include "worker/engine/dist/communicator.h"
#include "worker/engine/dist/peer_waits.h"

namespace tessera::engine {

class StoreCommitChannel final : public CommitChannel {
 public:
  // `waits` (may be null) must outlive the channel.
  explicit StoreCommitChannel(c10::intrusive_ptr<c10d::Store> store, PeerWaits* waits = nullptr)
      : store_(std::move(store)), waits_(waits) {}
  absl::Status Publish(int64_t step, const ShardRecord& record) override;
  absl::StatusOr<ShardRecord> Await(int64_t step, int index, absl::Duration timeout) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  PeerWaits* waits_;
};

}  // namespace tessera::engine
