#pragma once
// One WatchRuns call's work as steps (pumped_stream.h): first where the watch starts (after the
// newest event: a watch shows changes from now on), then each step sends the changes of the
// runs `who` may see that match the filter, or waits for the next event to commit (or for the
// fallback poll). RunManager::WatchRuns drives it on its caller's thread; the run service's
// WatchRuns in a StreamPump, without a thread of its own.

#include <memory>

#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/common/pumped_stream.h"
#include "services/store/change_feed.h"
#include "services/store/run_store.h"
#include "tessera/v1/runs.pb.h"

namespace tessera::runs {

class RunChangeWatch final : public StreamSteps<v1::RunChange> {
 public:
  // `filter` checked already (CheckRunFilter).
  RunChangeWatch(std::shared_ptr<store::RunStore> runs, std::shared_ptr<store::ChangeFeed> changes,
                 std::shared_ptr<Clock> clock, auth::Principal who, v1::RunFilter filter,
                 absl::Duration poll_interval);

  // The first step fixes the start and asks for the headers to go out (StreamStep::headers).
  StreamStep Step(std::deque<v1::RunChange>& out, const std::function<bool()>& done) override;

 private:
  const std::shared_ptr<store::RunStore> runs_;
  const std::shared_ptr<store::ChangeFeed> changes_;
  const std::shared_ptr<Clock> clock_;
  const auth::Principal who_;
  const v1::RunFilter filter_;
  const absl::Duration poll_interval_;
  bool started_ = false;
  int64_t last_id_ = 0;  // the last event seen
};

}  // namespace tessera::runs
