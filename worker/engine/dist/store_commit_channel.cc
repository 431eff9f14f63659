#include "worker/engine/dist/store_commit_channel.h"

#include <optional>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/strings/str_cat.h"
#include "base/clock.h"

namespace tessera::engine {
namespace {

std::string Key(int64_t step, int index) { return absl::StrCat("ckpt/", step, "/shard/", index); }

}  // namespace

absl::Status StoreCommitChannel::Publish(int64_t step, const ShardRecord& record) {
  const std::string value = EncodeShardRecord(record);
  try {
    store_->set(Key(step, record.index), std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("announcing shard ", record.index, " of step ", step, ": ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardRecord> StoreCommitChannel::Await(int64_t step, int index,
                                                      absl::Duration timeout) {
  const std::string key = Key(step, index);
  std::optional<PeerWaits::Scope> waiting;
  if (waits_ != nullptr) waiting.emplace(*waits_);
  // On the monotonic clock: a step of the node's wall clock must not end the wait.
  MonotonicClock clock;
  const absl::Time deadline = clock.Now() + timeout;
  try {
    // Polling with check() holds the connection only briefly; get() would block on it.
    while (!store_->check({key})) {
      if (clock.Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("shard ", index, " of step ", step,
                                                        " was not written within ",
                                                        absl::FormatDuration(timeout)));
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    const auto bytes = store_->get(key);
    return DecodeShardRecord(std::string(bytes.begin(), bytes.end()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("waiting for shard ", index, " of step ", step, ": ", e.what()));
  }
}

}  // namespace tessera::engine
