#pragma once
// Committed log lines handed to this process's followers in memory, so that a follower that has
// caught up reads the database again only when it must. A log store publishes each batch it
// stored, after the commit; a follower subscribes to one attempt before its first read, takes what
// was published since, and is told whether that is everything: not when lines may have been
// committed elsewhere (another process or store bundle, seen through the change feed), when the
// feed is not listening, or when the follower fell too far behind and its queue was dropped. Then
// it reads the store, as every follower did before.
//
// One copy of a batch's lines is shared by every subscriber of its attempt.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "services/store/change_feed.h"
#include "tessera/v1/logs.pb.h"

namespace tessera::store {

// A batch of lines to store, and once committed, what the fan-out hands over: plain lines, and
// lines packed per stream (v1::PackedLogLines, node_name set), which stay packed on the way in
// (no message per line on the path that stores them) and on to a follower that sends them
// packed; one that needs messages takes them apart on its own thread.
struct LogBatchToStore {
  std::vector<v1::LogLine> lines = {};
  std::vector<v1::PackedLogLines> packed = {};
};

using LogLineBatch = std::shared_ptr<const LogBatchToStore>;

class LogFanout;

class LogSubscription {
 public:
  ~LogSubscription();
  LogSubscription(const LogSubscription&) = delete;
  LogSubscription& operator=(const LogSubscription&) = delete;

  struct Taken {
    // The attempt's lines published since the last Take, in the order they were published.
    std::vector<LogLineBatch> batches;
    // Every line of the attempt committed since the last Take is in `batches`. When false, the
    // store must be read (lines may be missing from `batches`).
    bool complete = false;
  };
  Taken Take();

  // Calls `wake` (once, on the publisher's thread, so it must be quick) when this attempt's
  // lines are next published or the queue is dropped; at once if something waits to be taken.
  // For a follower that waits for news without a thread (stream_pump.h): it then needs the
  // change feed only for other writers' commits (ForeignGeneration). A Take forgets it.
  void WakeOnNews(std::function<void()> wake);

 private:
  friend class LogFanout;
  struct Shared;
  LogSubscription(std::shared_ptr<Shared> shared, std::string run_id, int32_t resumption_index,
                  uint64_t foreign_seen);

  const std::shared_ptr<Shared> shared_;
  const std::string run_id_;
  const int32_t resumption_index_;
  // Guarded by shared_->mu.
  std::vector<LogLineBatch> queued_;
  int64_t queued_bytes_ = 0;
  bool overflowed_ = false;
  uint64_t foreign_seen_;
  std::function<void()> waker_;
};

class LogFanout {
 public:
  // `feed`: the change feed of the same store bundle; woken at each publish, and the judge of
  // whether lines came from elsewhere. `max_queued_bytes`: a subscriber further behind than that
  // (QueuedBytes of what it has not taken) loses its queue and reads the store. 128 MiB is about
  // a second of ranks printing at full speed in packed lines: a follower's thread that waits a
  // moment for a core does not drop to reading, which is slower than following.
  explicit LogFanout(std::shared_ptr<ChangeFeed> feed,
                     int64_t max_queued_bytes = int64_t{128} << 20);

  // What a batch counts for in a subscriber's queue: its bytes (text, a packed group's encoding)
  // and kOverheadBytes per line or packed group.
  static constexpr int64_t kOverheadBytes = 64;
  static int64_t QueuedBytes(const LogBatchToStore& batch);

  std::unique_ptr<LogSubscription> Subscribe(const std::string& run_id, int32_t resumption_index);

  // Lines the store just committed (any attempts, in batch order), taken over: not copied.
  // Cheap when nobody follows.
  void Publish(LogBatchToStore batch);
  // A store call failed, and lines may have been committed all the same (a commit whose outcome
  // is unknown): every subscriber reads the store at its next Take.
  void Invalidate();

 private:
  const std::shared_ptr<LogSubscription::Shared> shared_;
};

}  // namespace tessera::store
