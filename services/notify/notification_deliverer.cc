#include "services/notify/notification_deliverer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/backoff.h"
#include "base/timestamps.h"

namespace tessera::notify {

DeliveryOutcome Classify(const WebhookResponse& response) {
  const int status = response.http_status;
  if (status >= 200 && status < 300) return DeliveryOutcome::kDelivered;
  if (status == 0 || status == 408 || status == 425 || status == 429 || status >= 500) {
    return DeliveryOutcome::kRetry;
  }
  return DeliveryOutcome::kRefused;
}

absl::Duration RetryDelay(int attempts, const DeliveryOptions& options, Random& random) {
  return BackoffDelay(
      {.first = options.first_retry, .max = options.max_retry, .low = 0.8, .high = 1.2}, attempts,
      random);
}

NotificationDeliverer::NotificationDeliverer(std::shared_ptr<store::NotificationStore> store,
                                             std::shared_ptr<WebhookPoster> poster,
                                             SecretOpener open_secret, std::shared_ptr<Clock> clock,
                                             std::shared_ptr<Random> random,
                                             DeliveryOptions options)
    : store_(std::move(store)),
      poster_(std::move(poster)),
      open_secret_(std::move(open_secret)),
      clock_(std::move(clock)),
      random_(std::move(random)),
      options_(options),
      pool_(std::max(1, options.threads)) {}

NotificationDeliverer::~NotificationDeliverer() { AwaitIdle(); }

absl::StatusOr<int> NotificationDeliverer::DeliverDue() {
  {
    // A post that finishes from here on may be read below as still pending: it is skipped.
    absl::MutexLock lock(&mu_);
    finished_.clear();
  }
  auto due = store_->DueNotifications(clock_->Now(), options_.batch);
  if (!due.ok()) return due.status();
  if (due->empty()) return 0;
  auto subs = store_->ListSubscriptions();
  if (!subs.ok()) return subs.status();
  std::map<std::string, const store::SubscriptionRecord*> by_id;
  for (const auto& s : *subs) by_id[s.subscription.id()] = &s;
  int started = 0;
  for (auto& n : *due) {
    const auto it = by_id.find(n.subscription_id());
    if (it == by_id.end()) continue;  // deleted meanwhile: its notifications go with it
    {
      absl::MutexLock lock(&mu_);
      const int cap = slow_.count(n.subscription_id()) ? 1 : options_.per_subscription;
      if (in_flight_.count(n.id()) || finished_.count(n.id()) ||
          per_subscription_[n.subscription_id()] >= cap) {
        continue;
      }
      in_flight_.insert(n.id());
      ++per_subscription_[n.subscription_id()];
    }
    auto secret = open_secret_(*it->second);
    if (!secret.ok()) {
      // Not the receiver's fault, and no retry will mend it: said once, on the notification.
      n.set_state(v1::NOTIFICATION_STATE_GAVE_UP);
      n.set_last_error(
          absl::StrCat("the signing secret cannot be opened: ", secret.status().message()));
      (void)store_->UpdateNotification(n);
      Done(n, -absl::Seconds(1));
      continue;
    }
    pool_.Submit(
        [this, n, subscription = it->second->subscription, secret = *std::move(secret)]() mutable {
          Deliver(std::move(n), subscription, secret);
        });
    ++started;
  }
  return started;
}

void NotificationDeliverer::Deliver(v1::Notification n, const v1::Subscription& subscription,
                                    const std::string& secret) {
  for (;;) {
    const absl::Time sent = clock_->Now();
    const WebhookResponse response =
        poster_->Post(RenderWebhook(subscription, secret, n, sent), options_.timeout);
    const absl::Time now = clock_->Now();
    Record(n, response, now);
    // The subject's next one goes at once on this thread when this one is done with (delivered
    // or given up) and the next is due: claimed before this outcome is stored, so that a pass
    // that reads the store after it finds the next one in flight, never posts it twice.
    std::optional<v1::Notification> next;
    if (n.state() != v1::NOTIFICATION_STATE_PENDING) {
      auto pending = store_->PendingOfSubject(n.subscription_id(), n.subject(), 2);
      if (pending.ok()) {
        for (auto& p : *pending) {
          if (p.id() != n.id() && FromProtoTime(p.next_attempt_at()) <= now) {
            next = std::move(p);
            break;
          }
        }
      }
      absl::MutexLock lock(&mu_);
      if (next && (in_flight_.count(next->id()) || now - sent > options_.slow_after)) next.reset();
      if (next) in_flight_.insert(next->id());
    }
    if (auto st = store_->UpdateNotification(n); !st.ok() && !absl::IsNotFound(st)) {
      // Not recorded: it stays due and is sent again (the receiver drops the repeat by its id).
      spdlog::warn("notifications: the outcome of {} not stored: {}", n.id(), st.ToString());
    }
    if (!next) {
      Done(n, now - sent);
      return;
    }
    {
      // The slot passes to the next one.
      absl::MutexLock lock(&mu_);
      if (now - sent <= options_.slow_after) slow_.erase(n.subscription_id());
      in_flight_.erase(n.id());
      finished_.insert(n.id());
    }
    n = *std::move(next);
  }
}

void NotificationDeliverer::Record(v1::Notification& n, const WebhookResponse& response,
                                   absl::Time now) {
  n.set_attempts(n.attempts() + 1);
  n.set_last_error(response.http_status != 0 && response.error.empty()
                       ? (Classify(response) == DeliveryOutcome::kDelivered
                              ? std::string()
                              : absl::StrCat("HTTP ", response.http_status))
                       : response.error);
  switch (Classify(response)) {
    case DeliveryOutcome::kDelivered:
      n.set_state(v1::NOTIFICATION_STATE_DELIVERED);
      *n.mutable_delivered_at() = ToProtoTime(now);
      break;
    case DeliveryOutcome::kRefused:
      n.set_state(v1::NOTIFICATION_STATE_GAVE_UP);
      break;
    case DeliveryOutcome::kRetry:
      if (now - FromProtoTime(n.created_at()) >= options_.give_up_after) {
        n.set_state(v1::NOTIFICATION_STATE_GAVE_UP);
        n.set_last_error(
            absl::StrCat(n.last_error(), "; given up after ", n.attempts(), " attempts"));
      } else {
        *n.mutable_next_attempt_at() =
            ToProtoTime(now + RetryDelay(n.attempts(), options_, *random_));
      }
      break;
  }
}

void NotificationDeliverer::Done(const v1::Notification& n, absl::Duration took) {
  absl::MutexLock lock(&mu_);
  if (took > options_.slow_after) {
    slow_.insert(n.subscription_id());
  } else if (took >= absl::ZeroDuration()) {
    slow_.erase(n.subscription_id());
  }
  in_flight_.erase(n.id());
  finished_.insert(n.id());
  if (--per_subscription_[n.subscription_id()] <= 0) per_subscription_.erase(n.subscription_id());
}

absl::Duration NotificationDeliverer::DueIn() {
  auto next = store_->NextDue();
  if (!next.ok()) return absl::ZeroDuration();
  return std::max(absl::ZeroDuration(), *next - clock_->Now());
}

bool NotificationDeliverer::Busy() {
  absl::MutexLock lock(&mu_);
  return !in_flight_.empty() || !finished_.empty();
}

void NotificationDeliverer::AwaitIdle() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::set<int64_t>* in_flight) { return in_flight->empty(); }, &in_flight_));
}

}  // namespace tessera::notify
