#pragma once
// One WatchRuns call's work as steps (pumped_stream.h): first where the watch starts (after the
// newest event: a watch shows changes from now on), then each step sends the changes of the
// runs `who` may see that match the filter, or waits for more. The events and their runs come
// from the RunEventTail every watch shares (one read of the store for all of them).
//
// RunManager::WatchRuns drives it on its caller's thread, waiting on the change feed; the run
// service's WatchRuns in a StreamPump that the tail wakes (UseTailWakes), without a thread of
// its own and without a step per commit of the cluster.

#include <memory>

#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/common/pumped_stream.h"
#include "services/runs/run_event_tail.h"
#include "services/store/change_feed.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

class RunChangeWatch final : public StreamSteps<v1::RunChange> {
 public:
  // `filter` checked already (CheckRunFilter).
  RunChangeWatch(std::shared_ptr<RunEventTail> tail, std::shared_ptr<store::ChangeFeed> changes,
                 std::shared_ptr<Clock> clock, auth::Principal who, v1::RunFilter filter,
                 absl::Duration poll_interval);
  ~RunChangeWatch() override;

  // For a caller that waits in a StreamPump of Wakes::kNever: the tail wakes the watch when a
  // change for it arrives (Waiting), and an idle watch steps every `check_interval`, each watch
  // at a moment of its own within it (its key is checked at each step; its read then makes a
  // tail older than its fresh_for read again).
  void UseTailWakes(absl::Duration check_interval) { tail_wakes_ = check_interval; }

  // The first step fixes the start and asks for the headers to go out (StreamStep::headers).
  StreamStep Step(std::deque<v1::RunChange>& out, const std::function<bool()>& done) override;
  void Waiting(std::function<void()> wake) override;

 private:
  const std::shared_ptr<RunEventTail> tail_;
  const std::shared_ptr<store::ChangeFeed> changes_;
  const std::shared_ptr<Clock> clock_;
  const auth::Principal who_;
  const v1::RunFilter filter_;
  const absl::Duration poll_interval_;
  const RunEventTail::WatcherId watcher_;
  std::optional<absl::Duration> tail_wakes_;
  bool started_ = false;
  int64_t last_id_ = 0;  // the last event seen
};

}  // namespace tessera::runs
