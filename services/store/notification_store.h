#pragma once
// Webhook subscriptions and their notifications (owned by the notifier, services/notify/). A
// notification is written once, when its event is planned, in the same transaction that moves
// the planner's cursor past the event: a planner that dies between the two plans the event again
// and writes nothing twice. Deliveries then update the notification's state.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tessera/v1/notifications.pb.h"

namespace tessera::store {

struct SubscriptionRecord {
  v1::Subscription subscription;
  // The signing secret, sealed by the notifier (empty: unsigned).
  std::string sealed_secret;
};

// A notification to write: `dedupe_key` is unique per subscription ("event/123",
// "queued/RUN-ID/2"): a second notification with the same key is not written.
struct NewNotification {
  v1::Notification notification;
  std::string dedupe_key;
};

struct NotificationFilter {
  std::string owner;            // empty: every owner's
  std::string subscription_id;  // empty: every subscription's
  int limit = 50;               // newest first
};

class NotificationStore {
 public:
  virtual ~NotificationStore() = default;

  // ALREADY_EXISTS when the id is taken.
  virtual absl::Status CreateSubscription(const SubscriptionRecord& record) = 0;
  // Every subscription, oldest first.
  virtual absl::StatusOr<std::vector<SubscriptionRecord>> ListSubscriptions() = 0;
  // NOT_FOUND when absent. Its notifications go with it.
  virtual absl::Status DeleteSubscription(std::string_view id) = 0;

  // Where the planner of `source` ("run-events", "node-events", ...) stands: the last position
  // it planned (0 before any).
  virtual absl::StatusOr<int64_t> Cursor(std::string_view source) = 0;
  // In one transaction: moves `source`'s cursor from `expected` to `next` and writes
  // `notifications` (each gets an id, increasing, and the state PENDING due at its created_at),
  // skipping any whose (subscription, dedupe_key) exists or whose subscription is gone.
  // ABORTED when the cursor is not at `expected` (another planner moved it). Returns how many
  // were written.
  virtual absl::StatusOr<int> Enqueue(std::string_view source, int64_t expected, int64_t next,
                                      const std::vector<NewNotification>& notifications) = 0;

  // The notifications to deliver now: for each (subscription, subject), its oldest PENDING
  // notification, if its next attempt is due at `now`; oldest first, at most `limit`. A later
  // notification of a subject waits for the earlier ones: deliveries keep their order.
  virtual absl::StatusOr<std::vector<v1::Notification>> DueNotifications(absl::Time now,
                                                                         int limit) = 0;
  // The oldest `limit` PENDING notifications of one subject of one subscription, oldest first:
  // a deliverer that finished the head goes on with the next at once.
  virtual absl::StatusOr<std::vector<v1::Notification>> PendingOfSubject(
      std::string_view subscription_id, std::string_view subject, int limit) = 0;
  // The earliest next attempt of a subject's head notification, if any (the deliverer sleeps
  // until then or until something is enqueued); absl::InfiniteFuture() when none is pending.
  virtual absl::StatusOr<absl::Time> NextDue() = 0;
  // Stores a delivery's outcome: state, attempts, next_attempt_at, delivered_at, last_error.
  // NOT_FOUND when it is gone (its subscription deleted).
  virtual absl::Status UpdateNotification(const v1::Notification& notification) = 0;
  // Newest first.
  virtual absl::StatusOr<std::vector<v1::Notification>> ListNotifications(
      const NotificationFilter& filter) = 0;
  // Removes notifications no longer pending created before `before`, at most `limit`: the
  // record's retention.
  virtual absl::StatusOr<int64_t> DeleteNotificationsBefore(absl::Time before, int limit) = 0;
};

}  // namespace tessera::store
