#pragma once
// What changed in the store, pushed to whoever waits for it: a watch of runs or node events, a
// log follower, the scheduler's copy of the nodes. Each topic has a generation that grows when a
// write to it commits; a watcher notes the generation, reads, and waits for it to move. The
// PostgreSQL feed learns of commits from every process through LISTEN/NOTIFY (triggers of migration
// 0010); the in-memory stores bump it themselves. When notifications may have been missed (the
// listening connection was lost), every generation moves, and until it is back watchers fall back
// to their poll interval.
//
// A feed also tells apart the commits of its own stores (the writers of one Stores bundle, in
// this process) from everyone else's: a log follower gets its own service's lines handed over in
// memory (log_fanout.h) and reads the database only when lines may have come from elsewhere.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"

namespace tessera::store {

// kNodes: a node's state (registered, changed, removed), not its heartbeat summaries.
enum class ChangeTopic { kRunEvents = 0, kNodeEvents = 1, kLogs = 2, kNodes = 3 };
inline constexpr int kChangeTopics = 4;

class ChangeFeed {
 public:
  virtual ~ChangeFeed() = default;

  ChangeFeed();

  uint64_t Generation(ChangeTopic topic) const;
  // Grows only with the commits of other writers than this feed's stores (another process, or
  // another Stores bundle), and when changes may have been missed.
  uint64_t ForeignGeneration(ChangeTopic topic) const;
  // Returns once Generation(topic) differs from `seen`, or `timeout` of `clock`'s time passed
  // (the fallback poll: a change this feed never heard of is still seen then).
  void WaitForChange(ChangeTopic topic, uint64_t seen, absl::Duration timeout, Clock& clock) const;

  // Calls `listener` after each move of `topic`'s generation, on the thread that moved it (so it
  // must be quick and must not call back into the feed's waits); until Unlisten with the id this
  // returns. For waiters that are not threads (stream_pump.h).
  int Listen(ChangeTopic topic, std::function<void()> listener);
  // Once this returns, the listener is not running and is not called again.
  void Unlisten(int id);

  // Whether changes reach this feed as they commit (false while a listener is disconnected).
  virtual bool live() const { return true; }

  // Names this feed's stores' commits: a PostgreSQL store sets it as its transaction's writer,
  // which the notification carries back (migration 0012). Random, per feed.
  const std::string& writer_id() const { return writer_id_; }

  // A write to `topic` committed, by this feed's stores.
  void Bump(ChangeTopic topic);
  // A write to `topic` committed, by someone else.
  void BumpForeign(ChangeTopic topic);
  // Changes may have been missed: every watcher looks again.
  void BumpAll();

 protected:
  // Called by the first Generation or WaitForChange (a feed that listens starts then).
  virtual void StartOnce() const {}

 private:
  // Tells the listeners of the topics whose bit is set in `topics`.
  void Tell(unsigned topics);

  const std::string writer_id_;
  // Held while a listener runs, so that Unlisten waits for it.
  absl::Mutex listeners_mu_;
  int next_listener_ ABSL_GUARDED_BY(listeners_mu_) = 0;
  std::map<int, std::pair<ChangeTopic, std::function<void()>>> listeners_
      ABSL_GUARDED_BY(listeners_mu_);
  mutable absl::Mutex mu_;
  std::array<uint64_t, kChangeTopics> generations_ ABSL_GUARDED_BY(mu_) = {};
  std::array<uint64_t, kChangeTopics> foreign_generations_ ABSL_GUARDED_BY(mu_) = {};
};

}  // namespace tessera::store
