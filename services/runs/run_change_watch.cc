#include "services/runs/run_change_watch.h"

#include <cmath>

namespace tessera::runs {

RunChangeWatch::RunChangeWatch(std::shared_ptr<RunEventTail> tail,
                               std::shared_ptr<store::ChangeFeed> changes,
                               std::shared_ptr<Clock> clock, auth::Principal who,
                               v1::RunFilter filter, absl::Duration poll_interval)
    : tail_(std::move(tail)),
      changes_(std::move(changes)),
      clock_(std::move(clock)),
      who_(std::move(who)),
      filter_(std::move(filter)),
      poll_interval_(poll_interval),
      watcher_(tail_->AddWatcher(who_, filter_)) {}

RunChangeWatch::~RunChangeWatch() { tail_->RemoveWatcher(watcher_); }

StreamStep RunChangeWatch::Step(std::deque<v1::RunChange>& out, const std::function<bool()>&) {
  if (!started_) {
    // Start after the newest event: a watch shows changes from now on.
    auto newest = tail_wakes_ ? tail_->Newest() : tail_->NewestInStore();
    if (!newest.ok()) return StreamStep::End(newest.status());
    last_id_ = *newest;
    started_ = true;
    StreamStep next = StreamStep::Again();
    next.headers = true;
    return next;
  }
  // Waiting on the feed itself, the watch reads the store itself (it has a thread: nothing to
  // share) after noting the generation.
  const uint64_t seen = tail_wakes_ ? 0 : changes_->Generation(store::ChangeTopic::kRunEvents);
  constexpr size_t kPage = 500;
  auto entries =
      tail_wakes_ ? tail_->After(last_id_, kPage) : tail_->ReadFromStore(last_id_, kPage);
  if (!entries.ok()) return StreamStep::End(entries.status());
  for (const auto& entry : *entries) {
    last_id_ = entry->event.id();
    if (RunEventTail::Sends(who_, filter_, *entry)) {
      out.push_back(RunEventTail::ChangeFor(*entry));
    }
  }
  if (entries->size() == kPage) return StreamStep::Again();
  // Nothing more: look again when the tail says so (or an event commits), or after the poll
  // interval of the injected clock (the fallback when the feed missed it).
  if (!tail_wakes_) return StreamStep::WaitFor(seen, clock_->Now() + poll_interval_);
  // Each watch at a moment of its own within the period (watches that opened together, a
  // dashboard's or a script's, do not step all at once, and keep to their moments whatever wakes
  // them), spread evenly whatever their number: the golden ratio's multiples modulo 1.
  const double phase = std::fmod(static_cast<double>(watcher_) * 0.6180339887498949, 1.0);
  return StreamStep::WaitFor(seen, TickAfter(clock_->Now(), *tail_wakes_, phase * *tail_wakes_));
}

void RunChangeWatch::Waiting(std::function<void()> wake) {
  if (tail_wakes_) tail_->WakeWhenNews(watcher_, last_id_, std::move(wake));
}

}  // namespace tessera::runs
