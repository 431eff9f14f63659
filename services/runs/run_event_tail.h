#pragma once
// The newest events of every run, each with its run, read from the store once for every open
// watch (RunChangeWatch). 10,000 watches that each read every new event and its run would be
// 10,000 reads of the store per commit; here one read serves them all, and a watch is woken
// only when an event it would send arrived (the events of its user's runs, or of every run for
// an operator, matching its filter), not by every commit of the cluster.
//
// The tail reads when the change feed says run events committed (on a thread of its own, which
// then wakes the watches concerned), and when a watch asks while what it holds is older than
// `fresh_for` (the fallback when the feed missed a commit: an idle watch steps now and then).
// It holds at most `max_events` events and `max_bytes` of runs; a watch that fell further
// behind reads the store itself. While no watch is open it reads nothing and holds nothing.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "services/common/auth/principal.h"
#include "services/store/change_feed.h"
#include "services/store/run_store.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

struct RunEventTailOptions {
  // What it holds is read again when older than this, even when the feed said nothing.
  absl::Duration fresh_for = absl::Milliseconds(200);
  size_t max_events = 4096;
  size_t max_bytes = 32 << 20;
};

class RunEventTail {
 public:
  // An event and its run as the tail read it: a run's summary as lists carry it, with its
  // metadata (for filters; RunEventTail::ChangeFor drops it). Null: the run is deleted.
  struct Entry {
    v1::RunEvent event;
    std::shared_ptr<const v1::Run> run;
    size_t bytes = 0;  // the event's and the run's encoded size, what counts against max_bytes
  };
  using Entries = std::vector<std::shared_ptr<const Entry>>;

  RunEventTail(std::shared_ptr<store::RunStore> runs, std::shared_ptr<store::ChangeFeed> changes,
               std::shared_ptr<Clock> clock, RunEventTailOptions options = {});
  ~RunEventTail();
  RunEventTail(const RunEventTail&) = delete;
  RunEventTail& operator=(const RunEventTail&) = delete;

  // The newest event's id once every event committed before the call (that the feed heard of)
  // is read: where a watch that shows changes from now on starts.
  absl::StatusOr<int64_t> Newest();
  // Up to `limit` events after `after_id`, oldest first: what the tail holds (read again first
  // if older than fresh_for).
  absl::StatusOr<Entries> After(int64_t after_id, size_t limit);

  // The same from the store, now, for a watch that waits on the feed itself
  // (RunManager::WatchRuns, which has a thread and needs no sharing): exact whatever the feed
  // heard.
  // (NewestInStore: the newest id after `after`, read a page of ids at a time.)
  absl::StatusOr<int64_t> NewestInStore(int64_t after = 0);
  absl::StatusOr<Entries> ReadFromStore(int64_t after_id, size_t limit);

  // A watch that wants to be woken when an event it would send arrives.
  using WatcherId = uint64_t;
  WatcherId AddWatcher(auth::Principal who, v1::RunFilter filter);
  // After it returns, the watcher's wake is not running and is never called again.
  void RemoveWatcher(WatcherId id);
  // Calls `wake` once, as soon as an event after `after_id` that `id` would send is held (at once
  // if one is already). The wake must be quick (a StreamPump's WakeNow).
  void WakeWhenNews(WatcherId id, int64_t after_id, std::function<void()> wake);

  // Whether `who` watching with `filter` is sent the entry.
  static bool Sends(const auth::Principal& who, const v1::RunFilter& filter, const Entry& entry);
  // The change a watch sends for the entry.
  static v1::RunChange ChangeFor(const Entry& entry);

  // Reads of the store so far (each a page of events and their runs), for tests and benchmarks.
  uint64_t reads() const;

 private:
  struct Watcher {
    auth::Principal who;
    v1::RunFilter filter;
    int64_t after = 0;
    std::function<void()> wake;  // empty: not waiting
  };

  // Reads what committed after what the tail holds, unless another caller is reading: then
  // waits for that read. Returns once a read that began at the feed's `generation` or later,
  // within fresh_for of now, is held.
  absl::Status CatchUp(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  bool FreshLocked(uint64_t generation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads every event after the newest held; the newest's id only, at the first read (and the
  // first after the tail let go of what it held, when nobody watched).
  absl::StatusOr<Entries> ReadNews(bool known, int64_t newest, int64_t* new_newest);
  // Adds what a read found, drops what no longer fits.
  void KeepLocked(const Entries& fresh, int64_t new_newest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The watchers that wait and would be sent one of `fresh`; their wakes are taken.
  std::vector<std::function<void()>> TakeWakesLocked(const Entries& fresh)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnCommit();

  const std::shared_ptr<store::RunStore> runs_;
  const std::shared_ptr<store::ChangeFeed> changes_;
  const std::shared_ptr<Clock> clock_;
  const RunEventTailOptions options_;

  mutable absl::Mutex mu_;
  bool known_ ABSL_GUARDED_BY(mu_) = false;  // newest_ was read once
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  int64_t newest_ ABSL_GUARDED_BY(mu_) = 0;
  // Every event with floor_ < id <= newest_ is in entries_ (unless deleted).
  int64_t floor_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::shared_ptr<const Entry>> entries_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t read_generation_ ABSL_GUARDED_BY(mu_) = 0;  // the feed's, before the last read
  absl::Time read_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t reads_ ABSL_GUARDED_BY(mu_) = 0;
  WatcherId next_watcher_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<WatcherId, Watcher> watchers_ ABSL_GUARDED_BY(mu_);
  // Who may be woken by a run's events: its owner's watchers, and those who see every run.
  absl::flat_hash_map<std::string, absl::flat_hash_set<WatcherId>> by_user_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<WatcherId> sees_all_ ABSL_GUARDED_BY(mu_);
  // Held while wakes are called, so that RemoveWatcher waits for them.
  absl::Mutex waking_;

  // Reads on the feed's word (OnCommit), one at a time; started with the first watcher, outside
  // mu_ (the feed calls OnCommit under its own lock, which then takes mu_).
  absl::once_flag reading_started_;
  bool read_queued_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<ThreadPool> reader_;
  int listener_ = -1;
};

}  // namespace tessera::runs
