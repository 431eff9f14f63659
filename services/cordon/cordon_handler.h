#pragma once
// The cordon service: cordon, uncordon and drain nodes; every change is a node event with its
// time, actor, reason and evidence, written atomically with the node's new state.

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "base/clock.h"
#include "services/common/auth/principal.h"
#include "services/common/idempotency.h"
#include "services/cordon/node_event_watch.h"
#include "services/store/change_feed.h"
#include "services/store/node_event_store.h"
#include "services/store/node_store.h"
#include "tessera/v1/cordon.pb.h"

namespace tessera::cordon {

class CordonHandler {
 public:
  CordonHandler(std::shared_ptr<store::NodeStore> nodes,
                std::shared_ptr<store::NodeEventStore> events,
                std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<Clock> clock,
                std::shared_ptr<store::ChangeFeed> changes = nullptr);

  using Who = auth::Principal;
  absl::Status CordonNode(const Who& who, const v1::CordonNodeRequest& req,
                          v1::CordonNodeResponse* resp);
  absl::Status UncordonNode(const Who& who, const v1::UncordonNodeRequest& req,
                            v1::UncordonNodeResponse* resp);
  absl::Status DrainNode(const Who& who, const v1::DrainNodeRequest& req,
                         v1::DrainNodeResponse* resp);
  absl::Status ListNodeEvents(const Who& who, const v1::ListNodeEventsRequest& req,
                              v1::ListNodeEventsResponse* resp);
  // Sends the events after filter.after_id (the newest filter.limit of them when after_id is 0
  // and a limit is set), then each new one as it is recorded, until `send` returns false or
  // `done()`.
  // On the caller's thread, between the steps of OpenWatch.
  absl::Status WatchNodeEvents(const Who& who, const v1::WatchNodeEventsRequest& req,
                               const std::function<bool(const v1::NodeEvent&)>& send,
                               const std::function<bool()>& done, absl::Duration poll_interval);
  // The same watch as steps (node_event_watch.h), for a caller that waits in a StreamPump on
  // change_feed()'s kNodeEvents topic. INVALID_ARGUMENT naming the field for a bad filter.
  absl::StatusOr<std::unique_ptr<NodeEventWatch>> OpenWatch(const Who& who,
                                                            const v1::WatchNodeEventsRequest& req,
                                                            absl::Duration poll_interval);
  const std::shared_ptr<store::ChangeFeed>& change_feed() const { return changes_; }
  const std::shared_ptr<Clock>& clock() const { return clock_; }

  // The event as `who` may see it: a user sees no run named in its evidence (another user's).
  static v1::NodeEvent AsSeenBy(const Who& who, v1::NodeEvent event);

 private:
  // Moves the node to `state` and records the event, unless it is already there.
  absl::Status Change(const Who& who, const std::string& node_name, v1::NodeAdminState state,
                      v1::NodeEventType type, const std::string& reason,
                      const google::protobuf::Struct* evidence, v1::Node* node_out,
                      v1::NodeEvent* event_out);

  std::shared_ptr<store::NodeStore> nodes_;
  std::shared_ptr<store::NodeEventStore> events_;
  std::shared_ptr<IdempotentCalls> idem_;
  std::shared_ptr<Clock> clock_;
  // Wakes WatchNodeEvents when node events commit (null at construction: polling only).
  std::shared_ptr<store::ChangeFeed> changes_;
};

// The actor recorded for a principal: a person, or the health API / another component.
v1::Actor ActorFor(const auth::Principal& who);

}  // namespace tessera::cordon
