// What the ranks report about their training (tessera-train appends one JSON object per step to
// the file TESSERA_PROGRESS_FILE names; see worker/progress/progress_file.h). The
// watcher tails every rank's file, keeps each rank's newest record and when it last moved, and
// hands the control session one update per attempt at most every `min_interval` — the newest
// record of the attempt's lowest local rank — so a run's progress reaches the run manager
// without a database write per step.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/clock.h"
#include "tessera/v1/worker.pb.h"
#include "worker/daemon/attempt_manager.h"
#include "worker/daemon/attempt_record.h"

namespace tessera::worker {

class ProgressWatcher {
 public:
  ProgressWatcher(std::shared_ptr<Clock> clock, absl::Duration min_interval = absl::Seconds(1));

  void Watch(const RankOutput& rank);
  // The rank has exited: its file is read one last time and then forgotten once sent.
  void RankDone(const RankOutput& rank);

  ~ProgressWatcher();

  // Reads the files on a thread of its own every `interval` from now on, so that Poll (on the
  // control stream's heartbeat thread) never waits for a file a rank controls.
  void StartReader(absl::Duration interval);
  // Reads what the files gained: at most 1 MiB per file per call, regular files only, never
  // through a symbolic link; a line longer than 64 KiB is dropped.
  void ReadFiles();
  // The updates due now; reads the files first unless the reader thread does.
  std::vector<v1::ProgressUpdate> Poll();

  // Ranks that reported progress at least once (a step, or that they are ready to take their
  // first: a ready record) and then none for their hang_timeout, while still running; each
  // attempt is reported once. A rank waiting in a collective (and not
  // stopped) is more likely waiting for a hung peer than hung itself: it is reported only after
  // twice the timeout, marked in_collective, so that the peer's node is blamed first.
  // A rank that has not reported yet may be starting (loading data, a checkpoint), which takes
  // any time: it is hung only when, for its hang_timeout, its process group used no CPU while one
  // of its processes was stopped or stuck in the kernel (before_first_report), so that an
  // attempt started on a node that is already hung is not left waiting for good.
  std::vector<v1::RankHang> TakeHangs();

  // A rank's newest record and when it last changed.
  struct RankState {
    std::string run_id;
    int resumption_index = 0;
    int rank = 0;
    std::optional<v1::RunProgress> latest;
    // The step its ready record said it starts from (the record before its first step): from
    // then on its silence counts as for a rank that reported.
    std::optional<int64_t> ready_step;
    absl::Time watched_since;
    absl::Time last_change;
    bool done = false;
    absl::Duration hang_timeout = absl::ZeroDuration();
    pid_t pid = 0;  // the rank's process group
    // Its group's CPU time at the last look, and since when it has not moved.
    unsigned long long cpu_ticks = 0;
    absl::Time cpu_still_since;
  };
  std::vector<RankState> Ranks();

 private:
  using AttemptKey = std::pair<std::string, int>;
  struct File {
    RankState state;
    std::string path;
    int64_t offset = 0;
    std::string partial;
  };
  struct AttemptSent {
    absl::Time at = absl::InfinitePast();
    int64_t step = -1;
    int rollback = 0;  // the newest loss rollback sent (its number)
  };
  using FileKey = std::tuple<std::string, int, int>;
  // Reads one file (or all when `only` is null) outside mu_, then parses under it.
  void Read(const FileKey* only);
  void Parse(File& f, const std::string& bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a rank that never reported is stuck (TakeHangs), from a look at its process group
  // (a group with no live member is gone: its exit is reported, not a hang).
  static bool StuckBeforeFirstReport(RankState& s, const GroupSample& group, absl::Time now);
  // The reader's wake-up (the destructor sets stopping_ under mu_, so that it sees it).
  bool StoppingOrFollowing() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || !files_.empty();
  }

  const std::shared_ptr<Clock> clock_;
  const absl::Duration min_interval_;
  absl::Mutex mu_;
  std::map<std::tuple<std::string, int, int>, File> files_ ABSL_GUARDED_BY(mu_);
  std::map<AttemptKey, AttemptSent> sent_ ABSL_GUARDED_BY(mu_);
  std::set<AttemptKey> hang_reported_ ABSL_GUARDED_BY(mu_);
  // One reader at a time (the thread, RankDone): a file's offset moves only under it.
  absl::Mutex read_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::atomic<bool> reader_running_{false};
  std::atomic<bool> stopping_{false};
  std::thread reader_;
};

}  // namespace tessera::worker
