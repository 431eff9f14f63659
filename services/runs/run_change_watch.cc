#include "services/runs/run_change_watch.h"

#include "services/store/filters.h"

namespace tessera::runs {

RunChangeWatch::RunChangeWatch(std::shared_ptr<store::RunStore> runs,
                               std::shared_ptr<store::ChangeFeed> changes,
                               std::shared_ptr<Clock> clock, auth::Principal who,
                               v1::RunFilter filter, absl::Duration poll_interval)
    : runs_(std::move(runs)),
      changes_(std::move(changes)),
      clock_(std::move(clock)),
      who_(std::move(who)),
      filter_(std::move(filter)),
      poll_interval_(poll_interval) {}

StreamStep RunChangeWatch::Step(std::deque<v1::RunChange>& out, const std::function<bool()>&) {
  if (!started_) {
    // Start after the newest event: a watch shows changes from now on.
    for (;;) {
      auto latest = runs_->ListAllEvents(last_id_, 1000);
      if (!latest.ok()) return StreamStep::End(latest.status());
      if (latest->empty()) break;
      last_id_ = latest->back().id();
    }
    started_ = true;
    StreamStep next = StreamStep::Again();
    next.headers = true;
    return next;
  }
  const uint64_t seen = changes_->Generation(store::ChangeTopic::kRunEvents);
  auto events = runs_->ListAllEvents(last_id_, 500);
  if (!events.ok()) return StreamStep::End(events.status());
  for (const auto& e : *events) {
    last_id_ = e.id();
    auto run = runs_->GetRunById(e.run_id());
    if (!run.ok()) continue;  // deleted since
    if (!who_.may_see(run->user()) || !store::RunMatches(*run, filter_)) continue;
    v1::RunChange& change = out.emplace_back();
    *change.mutable_run() = *std::move(run);
    store::SummarizeRun(change.mutable_run());  // as lists carry runs
    *change.mutable_event() = e;
  }
  // Nothing new: look again when an event commits, or after the poll interval of the injected
  // clock (the fallback when the feed missed it).
  if (events->empty()) return StreamStep::WaitFor(seen, clock_->Now() + poll_interval_);
  return StreamStep::Again();
}

}  // namespace tessera::runs
