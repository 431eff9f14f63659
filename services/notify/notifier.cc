#include "services/notify/notifier.h"

#include <spdlog/spdlog.h>

namespace tessera::notify {

Notifier::Notifier(store::Stores stores, std::shared_ptr<WebhookPoster> poster,
                   const Sealer& sealer, std::shared_ptr<Clock> clock,
                   std::shared_ptr<Random> random, NotifierOptions options,
                   std::function<bool()> leads)
    : options_(options),
      clock_(clock),
      store_(stores.notifications),
      leads_(std::move(leads)),
      planner_(stores, clock, options.planner),
      deliverer_(
          stores.notifications, std::move(poster),
          [open = sealer.open](const store::SubscriptionRecord& r) -> absl::StatusOr<std::string> {
            if (r.sealed_secret.empty()) return std::string();
            if (!open) return absl::FailedPreconditionError("this server keeps no secrets");
            return open(r.sealed_secret, r.subscription.id());
          },
          clock, std::move(random), options.delivery),
      planning_(clock, options.plan_interval, [this] { Plan(); }),
      delivering_(
          clock, options.deliver_interval,
          [this] {
            if (!leading_) return;
            if (auto started = deliverer_.DeliverDue(); !started.ok()) {
              spdlog::warn("notifications: cannot read what is due: {}",
                           started.status().ToString());
            }
          },
          PeriodicRunner::FirstRun::kAfterInterval,
          // Soon again while deliveries end: each ends with its subject's next one due.
          [this] { return deliverer_.Busy() ? options_.busy_interval : absl::ZeroDuration(); }),
      retention_(clock, absl::Minutes(10), [this] {
        if (!leading_) return;
        auto deleted =
            store_->DeleteNotificationsBefore(clock_->Now() - options_.retention, 10'000);
        if (!deleted.ok())
          spdlog::warn("notifications: retention: {}", deleted.status().ToString());
      }) {}

void Notifier::Plan() {
  leading_ = leads_();  // the election's one beat
  if (!leading_) return;
  // ABORTED: another instance moved a cursor (a leader change): the next pass reads it again.
  for (const auto& written : {planner_.PlanRunEvents(), planner_.PlanNodeEvents()}) {
    if (!written.ok() && !absl::IsAborted(written.status())) {
      spdlog::warn("notifications: planning: {}", written.status().ToString());
    }
  }
  if (clock_->Now() >= next_queue_pass_) {
    next_queue_pass_ = clock_->Now() + options_.queue_wait_interval;
    if (auto written = planner_.PlanQueueWaits(); !written.ok()) {
      spdlog::warn("notifications: queue waits: {}", written.status().ToString());
    }
  }
}

}  // namespace tessera::notify
