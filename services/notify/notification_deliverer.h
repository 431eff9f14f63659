#pragma once
// Delivers what is due (NotificationStore::DueNotifications: each subject's oldest pending
// notification, so a run's notifications arrive in order) by posting it to its subscription's
// URL on a pool of its own threads; a thread that finished a subject's head goes on with the
// subject's next one when it is due (a run's burst needs no pass per notification). A
// subscription has at most `per_subscription` posts in
// flight, and one once its receiver is slow (its last answer took over `slow_after`, or never
// came): a receiver that stalls holds one thread for at most `timeout` while the others are
// served, and nothing of the control plane waits on a receiver.
//
//   2xx                              delivered
//   408, 425, 429, 5xx, no answer    retried after first_retry, doubling, at most max_retry, with
//                                    ±20% jitter; given up once older than give_up_after
//   any other answer (3xx, 4xx)      given up at once: the receiver refuses it (the next
//                                    notification of the subject goes on)
//
// Every outcome is stored on the notification (attempts, last_error, delivered_at), which is what
// `mcli get notifications` shows. A delivery interrupted by a crash is sent again (its
// X-Tessera-Delivery id lets a receiver drop the repeat).

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/clock.h"
#include "base/random.h"
#include "base/thread_pool.h"
#include "services/notify/webhook_poster.h"
#include "services/store/notification_store.h"

namespace tessera::notify {

struct DeliveryOptions {
  absl::Duration timeout = absl::Seconds(5);
  absl::Duration first_retry = absl::Seconds(1);
  absl::Duration max_retry = absl::Minutes(5);
  absl::Duration give_up_after = absl::Hours(24);
  int threads = 16;
  int per_subscription = 8;                      // posts in flight to one subscription at most
  absl::Duration slow_after = absl::Seconds(1);  // then one at a time
  int batch = 500;                               // due notifications read per pass
};

enum class DeliveryOutcome { kDelivered, kRetry, kRefused };
DeliveryOutcome Classify(const WebhookResponse& response);
// The wait before attempt `attempts` + 1 (attempts >= 1 made so far).
absl::Duration RetryDelay(int attempts, const DeliveryOptions& options, Random& random);

// A subscription's signing secret from its stored record ("" when unsigned).
using SecretOpener = std::function<absl::StatusOr<std::string>(const store::SubscriptionRecord&)>;

class NotificationDeliverer {
 public:
  NotificationDeliverer(std::shared_ptr<store::NotificationStore> store,
                        std::shared_ptr<WebhookPoster> poster, SecretOpener open_secret,
                        std::shared_ptr<Clock> clock, std::shared_ptr<Random> random,
                        DeliveryOptions options);
  // Waits for the posts in flight.
  ~NotificationDeliverer();

  // Starts posting what is due now and not already in flight; returns how many it started. One
  // caller at a time (the notifier's runner).
  absl::StatusOr<int> DeliverDue();
  // Until the earliest pending notification is due (zero when one is due now or cannot be told).
  absl::Duration DueIn();
  // Whether posts are in flight or ended since the last pass began: a subject whose head was
  // just delivered has its next notification due now, so the next pass should come soon.
  bool Busy();
  // Returns once no post is in flight (tests, and a pass that wants its outcomes).
  void AwaitIdle();

 private:
  void Deliver(v1::Notification n, const v1::Subscription& subscription, const std::string& secret);
  // Stores nothing: sets `n`'s outcome of `response` at `now`.
  void Record(v1::Notification& n, const WebhookResponse& response, absl::Time now);
  // `took`: how long its post took (negative: not posted).
  void Done(const v1::Notification& n, absl::Duration took);

  std::shared_ptr<store::NotificationStore> store_;
  std::shared_ptr<WebhookPoster> poster_;
  SecretOpener open_secret_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<Random> random_;
  const DeliveryOptions options_;

  absl::Mutex mu_;
  std::set<int64_t> in_flight_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> finished_ ABSL_GUARDED_BY(mu_);  // since the current pass read the store
  std::map<std::string, int> per_subscription_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> slow_ ABSL_GUARDED_BY(mu_);  // subscriptions whose receiver is slow
  ThreadPool pool_;  // last: joined first, while what its posts use still exists
};

}  // namespace tessera::notify
