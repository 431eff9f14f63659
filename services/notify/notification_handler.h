#pragma once
// The notification API (notifications.proto): people subscribe webhooks to their runs' events,
// their team's, or (operators) to nodes' events, and read what was delivered. What happens in
// the background (planning, delivering) is the notifier's (notifier.h).

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "base/random.h"
#include "services/common/auth/principal.h"
#include "services/store/notification_store.h"
#include "services/store/team_store.h"
#include "tessera/v1/notifications.pb.h"

namespace tessera::notify {

inline constexpr int kMaxSubscriptionsPerPerson = 20;
inline constexpr size_t kMinSecretBytes = 16;
inline constexpr size_t kMaxSecretBytes = 1024;
inline constexpr int kMaxNotificationsListed = 1000;

// Seals a signing secret for the store (empty plaintext: none), bound to `subscription_id`;
// and opens it again. Given by the binary (the run manager's key, --secrets-key-file), so that
// no secret is in a database row in clear. An empty Sealer: the server keeps no secrets.
struct Sealer {
  std::function<absl::StatusOr<std::string>(const std::string& plaintext,
                                            const std::string& subscription_id)>
      seal;
  std::function<absl::StatusOr<std::string>(const std::string& sealed,
                                            const std::string& subscription_id)>
      open;
};

class NotificationHandler {
 public:
  NotificationHandler(std::shared_ptr<store::NotificationStore> store,
                      std::shared_ptr<store::TeamStore> teams, Sealer sealer,
                      std::shared_ptr<Clock> clock, std::shared_ptr<Random> random);

  using Who = auth::Principal;
  absl::Status CreateSubscription(const Who& who, const v1::CreateSubscriptionRequest& req,
                                  v1::CreateSubscriptionResponse* resp);
  absl::Status ListSubscriptions(const Who& who, const v1::ListSubscriptionsRequest& req,
                                 v1::ListSubscriptionsResponse* resp);
  absl::Status DeleteSubscription(const Who& who, const v1::DeleteSubscriptionRequest& req,
                                  v1::DeleteSubscriptionResponse* resp);
  absl::Status ListNotifications(const Who& who, const v1::ListNotificationsRequest& req,
                                 v1::ListNotificationsResponse* resp);

 private:
  absl::StatusOr<store::SubscriptionRecord> Find(const Who& who, const std::string& id);

  std::shared_ptr<store::NotificationStore> store_;
  std::shared_ptr<store::TeamStore> teams_;
  Sealer sealer_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Random> random_;
};

// What is wrong with a subscription as asked (its URL, format, events for its scope, bound) and
// its secret, naming the field; OK when well formed. Who may ask for the scope is the handler's.
absl::Status ValidateSubscription(const v1::Subscription& s, const std::string& secret);

}  // namespace tessera::notify
