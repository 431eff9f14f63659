#pragma once
// One WatchNodeEvents call's work as steps (pumped_stream.h): first where it starts (after the
// filter's after_id, or before the newest `limit` events), then each step sends the next
// events as `who` may see them, or waits for one to commit (or for the fallback poll).
// CordonHandler::WatchNodeEvents drives it on its caller's thread; the cordon service's
// WatchNodeEvents in a StreamPump, without a thread of its own.

#include <memory>

#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/common/pumped_stream.h"
#include "services/store/change_feed.h"
#include "services/store/node_event_store.h"
#include "tessera/v1/cordon.pb.h"

namespace tessera::cordon {

class NodeEventWatch final : public StreamSteps<v1::NodeEvent> {
 public:
  // `filter` checked already.
  NodeEventWatch(std::shared_ptr<store::NodeEventStore> events,
                 std::shared_ptr<store::ChangeFeed> changes, std::shared_ptr<Clock> clock,
                 auth::Principal who, v1::NodeEventFilter filter, absl::Duration poll_interval);

  StreamStep Step(std::deque<v1::NodeEvent>& out, const std::function<bool()>& done) override;

 private:
  const std::shared_ptr<store::NodeEventStore> events_;
  const std::shared_ptr<store::ChangeFeed> changes_;
  const std::shared_ptr<Clock> clock_;
  const auth::Principal who_;
  v1::NodeEventFilter filter_;  // after_id: the last event sent
  const absl::Duration poll_interval_;
  bool started_ = false;
};

}  // namespace tessera::cordon
