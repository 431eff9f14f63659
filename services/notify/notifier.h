#pragma once
// The notifier's background work, on the instance that holds the notifier's leader role: the
// planner turns events into notifications every `plan_interval` (queue waits every
// `queue_wait_interval`), the deliverer posts what is due every `deliver_interval` (every
// `busy_interval` while posts end) on threads of its own, and delivered notifications older than
// `retention` are deleted. Nothing here is on a call path of the control plane: a slow or dead
// receiver delays only its own notifications.

#include <atomic>
#include <functional>
#include <memory>

#include "services/notify/notification_deliverer.h"
#include "services/notify/notification_handler.h"
#include "services/notify/notification_planner.h"
#include "transport/periodic_runner.h"

namespace tessera::notify {

struct NotifierOptions {
  absl::Duration plan_interval = absl::Milliseconds(200);
  absl::Duration queue_wait_interval = absl::Seconds(10);
  absl::Duration deliver_interval = absl::Milliseconds(200);
  absl::Duration busy_interval = absl::Milliseconds(20);  // while deliveries are in flight
  absl::Duration retention = absl::Hours(24 * 14);
  PlannerOptions planner;
  DeliveryOptions delivery;
};

class Notifier {
 public:
  // `leads`: whether this instance holds the notifier's role now (LeaderElection::Lead: it asks
  // the store). Asked on the planner's beat only; the other passes go by its last answer.
  Notifier(store::Stores stores, std::shared_ptr<WebhookPoster> poster, const Sealer& sealer,
           std::shared_ptr<Clock> clock, std::shared_ptr<Random> random, NotifierOptions options,
           std::function<bool()> leads);

 private:
  void Plan();

  const NotifierOptions options_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<store::NotificationStore> store_;
  std::function<bool()> leads_;
  std::atomic<bool> leading_{false};
  NotificationPlanner planner_;
  NotificationDeliverer deliverer_;
  absl::Time next_queue_pass_ = absl::InfinitePast();
  // Last: stopped before what they use goes.
  PeriodicRunner planning_;
  PeriodicRunner delivering_;
  PeriodicRunner retention_;
};

}  // namespace tessera::notify
