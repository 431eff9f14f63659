#pragma once
// Runs the work of long server streams (log follows, watches) without a thread each: a stream's
// work is a series of steps, each run on one of a few threads, and between two steps a stream
// that has nothing to send waits here, as an entry, for its change feed topic to move or for a
// moment (its fallback poll, a check it makes now and then), whichever comes first. 10,000 open
// follows are then 10,000 entries, not 10,000 threads blocked in ChangeFeed::WaitForChange.
//
// A step may block (a database read, a call to another service): that is why the steps run on
// the pump's threads and not on a completion queue's.

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "services/store/change_feed.h"

namespace tessera {

class StreamPump {
 public:
  // Which moves of the topic release a waiting stream.
  enum class Wakes {
    kEveryChange,  // Generation: any commit
    // ForeignGeneration: commits of other writers only, for streams that hear of their own
    // writers' commits another way (a log follow, from its fan-out subscription: WakeNow).
    kForeignChanges,
    // None: streams woken by a reader they share (a run watch, by the RunEventTail: WakeNow), or
    // at their moment. Generation is then always 0.
    kNever,
  };
  // `threads`: how many steps run at once. `tick`: waits that end at a moment end at the next
  // multiple of it (never before their moment; zero: at the moment itself), so that 10,000
  // streams whose checks fall at moments of their own within each second are released in
  // batches, a timer wake-up and a thread's wake-up per tick instead of one each.
  StreamPump(std::shared_ptr<store::ChangeFeed> feed, store::ChangeTopic topic,
             std::shared_ptr<Clock> clock, int threads, Wakes wakes = Wakes::kEveryChange,
             absl::Duration tick = absl::ZeroDuration());
  // The entries still waiting are dropped; what was handed to the threads runs first.
  ~StreamPump();
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  // Runs `work` on one of the pump's threads, in turn with the others.
  void Run(std::function<void()> work);

  using Ticket = uint64_t;
  // A ticket for a wait about to begin (RunAfterChange), so that whatever may end the wait can
  // be told its name first: a WakeNow before the wait begins ends it as soon as it begins.
  Ticket Reserve();
  // Runs `work` (as Run) once the topic's generation differs from `seen` (at once if it already
  // does) or the clock reaches `until`, or WakeNow(ticket) is called. The caller must not
  // touch what `work` may free once this was called: the work may be running already.
  void RunAfterChange(Ticket ticket, uint64_t seen, absl::Time until, std::function<void()> work);
  // The same with a ticket of its own, which it returns.
  Ticket RunAfterChange(uint64_t seen, absl::Time until, std::function<void()> work);
  // Runs the work of the wait `ticket` now, if it is still waiting or not begun yet (a caller
  // that went away, news for it); nothing for a wait that is over.
  void WakeNow(Ticket ticket);

  // The topic's generation now, of the kind that wakes (what a step notes before it reads).
  uint64_t Generation() const {
    switch (wakes_) {
      case Wakes::kEveryChange:
        return feed_->Generation(topic_);
      case Wakes::kForeignChanges:
        return feed_->ForeignGeneration(topic_);
      case Wakes::kNever:
        break;
    }
    return 0;
  }
  Clock& clock() const { return *clock_; }
  // Entries waiting.
  size_t waiting() const;
  // Waits that ended so far (at once or later), for tests and benchmarks.
  uint64_t waits_ended() const;

 private:
  struct Waiting {
    uint64_t seen;
    absl::Time until;
    std::function<void()> work;
  };

  void OnChange();
  void TimerLoop();
  // Hands the entry to the threads.
  void ReleaseLocked(Ticket ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<store::ChangeFeed> feed_;
  const store::ChangeTopic topic_;
  const std::shared_ptr<Clock> clock_;
  const Wakes wakes_;
  const absl::Duration tick_;
  std::unique_ptr<ThreadPool> threads_;
  mutable absl::Mutex mu_;
  Ticket next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t waits_ended_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<Ticket, Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  // Reserved and not begun: whether a WakeNow came meanwhile.
  absl::flat_hash_map<Ticket, bool> reserved_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, Ticket>> by_time_ ABSL_GUARDED_BY(mu_);
  // An entry came with an earlier moment than the one the timer waits for.
  bool earlier_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int listener_ = -1;
  std::thread timer_;
};

}  // namespace tessera
