#include "services/cordon/node_event_watch.h"

#include "services/cordon/cordon_handler.h"

namespace tessera::cordon {

NodeEventWatch::NodeEventWatch(std::shared_ptr<store::NodeEventStore> events,
                               std::shared_ptr<store::ChangeFeed> changes,
                               std::shared_ptr<Clock> clock, auth::Principal who,
                               v1::NodeEventFilter filter, absl::Duration poll_interval)
    : events_(std::move(events)),
      changes_(std::move(changes)),
      clock_(std::move(clock)),
      who_(std::move(who)),
      filter_(std::move(filter)),
      poll_interval_(poll_interval) {}

StreamStep NodeEventWatch::Step(std::deque<v1::NodeEvent>& out, const std::function<bool()>&) {
  if (!started_) {
    started_ = true;
    if (filter_.after_id() == 0 && filter_.limit() > 0) {
      // The newest `limit` events first: find where they start.
      v1::NodeEventFilter all = filter_;
      all.set_limit(0);
      auto past = events_->ListNodeEvents(all);
      if (!past.ok()) return StreamStep::End(past.status());
      if (static_cast<int>(past->size()) > filter_.limit()) {
        filter_.set_after_id((*past)[past->size() - filter_.limit() - 1].id());
      }
    }
    filter_.set_limit(500);
  }
  const uint64_t seen = changes_->Generation(store::ChangeTopic::kNodeEvents);
  auto events = events_->ListNodeEvents(filter_);
  if (!events.ok()) return StreamStep::End(events.status());
  for (const auto& e : *events) {
    filter_.set_after_id(e.id());
    out.push_back(CordonHandler::AsSeenBy(who_, e));
  }
  // Nothing new: look again when an event commits, or after the poll interval of the injected
  // clock (the fallback when the feed missed it).
  if (events->empty()) return StreamStep::WaitFor(seen, clock_->Now() + poll_interval_);
  return StreamStep::Again();
}

}  // namespace tessera::cordon
