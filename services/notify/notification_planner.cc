#include "services/notify/notification_planner.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"

namespace tessera::notify {
namespace {

// A gap wider than this is a jump of the sequence, not transactions in flight.
constexpr int64_t kMaxGapIds = 10'000;

bool Wants(const v1::Subscription& s, v1::NotificationEvent event) {
  return std::find(s.events().begin(), s.events().end(), event) != s.events().end();
}

// Whether a run event concerns `s`: the owner's runs, or the team's.
bool Covers(const v1::Subscription& s, const v1::Run& run) {
  switch (s.scope()) {
    case v1::SUBSCRIPTION_SCOPE_USER:
      return run.user() == s.owner();
    case v1::SUBSCRIPTION_SCOPE_TEAM:
      return !s.team().empty() && run.team() == s.team();
    default:
      return false;
  }
}

std::string Reason(const std::string& reason) {
  return reason.empty() ? std::string() : absl::StrCat(": ", reason);
}

}  // namespace

std::vector<int64_t> EventCursor::Take(int64_t stored, const std::vector<int64_t>& ids,
                                       absl::Time now, absl::Duration grace, int64_t* next_stored) {
  high_ = std::max(high_, stored);
  std::vector<int64_t> take;
  int64_t previous = stored;
  for (const int64_t id : ids) {
    if (id - previous - 1 > kMaxGapIds) {
      spdlog::warn("notifications: event ids jump from {} to {}; not waiting for the ids between",
                   previous, id);
    } else {
      for (int64_t missing = std::max(previous, high_) + 1; missing < id; ++missing) {
        gaps_.emplace(missing, now);
      }
    }
    if (id > high_ || gaps_.erase(id) > 0) take.push_back(id);
    high_ = std::max(high_, id);
    previous = id;
  }
  for (auto it = gaps_.begin(); it != gaps_.end();) {
    it = now - it->second >= grace ? gaps_.erase(it) : std::next(it);  // rolled back
  }
  *next_stored = gaps_.empty() ? high_ : gaps_.begin()->first - 1;
  return take;
}

NotificationPlanner::NotificationPlanner(store::Stores stores, std::shared_ptr<Clock> clock,
                                         PlannerOptions options)
    : stores_(std::move(stores)), clock_(std::move(clock)), options_(options) {}

std::vector<store::SubscriptionRecord> NotificationPlanner::Subscriptions() {
  auto subs = stores_.notifications->ListSubscriptions();
  if (!subs.ok()) return {};
  return *std::move(subs);
}

store::NewNotification NotificationPlanner::Make(const v1::Subscription& s,
                                                 v1::NotificationEvent event, std::string subject,
                                                 std::string text, absl::Time event_time,
                                                 std::string dedupe_key) const {
  store::NewNotification n;
  n.notification.set_subscription_id(s.id());
  n.notification.set_owner(s.owner());
  n.notification.set_event(event);
  n.notification.set_subject(std::move(subject));
  n.notification.set_text(std::move(text));
  *n.notification.mutable_event_time() = ToProtoTime(event_time);
  *n.notification.mutable_created_at() = ToProtoTime(clock_->Now());
  n.dedupe_key = std::move(dedupe_key);
  return n;
}

template <typename Event>
absl::StatusOr<int> NotificationPlanner::PlanEvents(const char* source, EventCursor& state,
                                                    const ReadAfter<Event>& read,
                                                    const PlanOne<Event>& plan) {
  TESSERA_ASSIGN_OR_RETURN(const int64_t stored, stores_.notifications->Cursor(source));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<Event> events, read(stored));
  std::vector<int64_t> ids;
  for (const auto& e : events) ids.push_back(e.id());
  int64_t next = stored;
  // On a copy: the cursor moves only with the notifications written (a failed pass reads the
  // same events again).
  EventCursor cursor = state;
  const std::vector<int64_t> take =
      cursor.Take(stored, ids, clock_->Now(), options_.gap_grace, &next);
  if (take.empty() && next == stored) {
    state = cursor;  // gaps noted, nothing to write
    return 0;
  }
  const auto subs = Subscriptions();
  std::vector<store::NewNotification> out;
  for (const auto& e : events) {
    if (std::binary_search(take.begin(), take.end(), e.id())) {
      TESSERA_RETURN_IF_ERROR(plan(e, subs, out));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(const int written,
                           stores_.notifications->Enqueue(source, stored, next, out));
  state = cursor;
  return written;
}

absl::StatusOr<int> NotificationPlanner::PlanRunEvents() {
  const auto read = [this](int64_t after) {
    return stores_.runs->ListAllEvents(after, options_.batch);
  };
  const auto plan = [this](const v1::RunEvent& e,
                           const std::vector<store::SubscriptionRecord>& subs,
                           std::vector<store::NewNotification>& out) -> absl::Status {
    v1::NotificationEvent kind = v1::NOTIFICATION_EVENT_UNSPECIFIED;
    switch (e.type()) {
      case v1::RUN_EVENT_TYPE_FAILED:
        kind = v1::NOTIFICATION_EVENT_RUN_FAILED;
        break;
      case v1::RUN_EVENT_TYPE_COMPLETED:
        kind = v1::NOTIFICATION_EVENT_RUN_COMPLETED;
        break;
      case v1::RUN_EVENT_TYPE_STOPPED:
        kind = v1::NOTIFICATION_EVENT_RUN_STOPPED;
        break;
      case v1::RUN_EVENT_TYPE_STARTED:
        if (e.resumption_index() > 0) kind = v1::NOTIFICATION_EVENT_RUN_RESUMED;
        break;
      case v1::RUN_EVENT_TYPE_LOSS_ROLLBACK:
        kind = v1::NOTIFICATION_EVENT_RUN_ROLLED_BACK;
        break;
      default:
        break;
    }
    if (kind == v1::NOTIFICATION_EVENT_UNSPECIFIED) return absl::OkStatus();
    bool wanted = false;
    for (const auto& s : subs) wanted = wanted || Wants(s.subscription, kind);
    if (!wanted) return absl::OkStatus();
    auto run = stores_.runs->GetRunById(e.run_id());
    if (absl::IsNotFound(run.status())) return absl::OkStatus();  // deleted since
    if (!run.ok()) return run.status();                           // planned on the next pass
    std::string text;
    switch (kind) {
      case v1::NOTIFICATION_EVENT_RUN_FAILED:
        text = absl::StrCat("Run ", run->name(), " failed", Reason(run->status_reason()));
        break;
      case v1::NOTIFICATION_EVENT_RUN_COMPLETED:
        text = absl::StrCat("Run ", run->name(), " completed");
        break;
      case v1::NOTIFICATION_EVENT_RUN_STOPPED:
        text = absl::StrCat("Run ", run->name(), " stopped", Reason(run->status_reason()));
        break;
      case v1::NOTIFICATION_EVENT_RUN_ROLLED_BACK:
        text = absl::StrCat("Run ", run->name(), ": ", e.message());
        break;
      default:
        text = absl::StrCat("Run ", run->name(), " resumed: attempt ", e.resumption_index() + 1,
                            " started");
        break;
    }
    for (const auto& s : subs) {
      if (!Wants(s.subscription, kind) || !Covers(s.subscription, *run)) continue;
      out.push_back(Make(s.subscription, kind, absl::StrCat("run/", run->name()), text,
                         FromProtoTime(e.time()), absl::StrCat("run-event/", e.id())));
    }
    return absl::OkStatus();
  };
  return PlanEvents<v1::RunEvent>(kRunEventsSource, run_cursor_, read, plan);
}

absl::StatusOr<int> NotificationPlanner::PlanNodeEvents() {
  const auto read = [this](int64_t after) {
    v1::NodeEventFilter filter;
    filter.set_after_id(after);
    filter.set_limit(options_.batch);
    return stores_.node_events->ListNodeEvents(filter);
  };
  const auto plan = [this](const v1::NodeEvent& e,
                           const std::vector<store::SubscriptionRecord>& subs,
                           std::vector<store::NewNotification>& out) -> absl::Status {
    v1::NotificationEvent kind = v1::NOTIFICATION_EVENT_UNSPECIFIED;
    std::string text;
    if (e.type() == v1::NODE_EVENT_TYPE_CORDONED) {
      kind = v1::NOTIFICATION_EVENT_NODE_CORDONED;
      text = absl::StrCat("Node ", e.node_name(), " cordoned", Reason(e.reason()));
    } else if (e.type() == v1::NODE_EVENT_TYPE_UNCORDONED) {
      kind = v1::NOTIFICATION_EVENT_NODE_RETURNED;
      text = absl::StrCat("Node ", e.node_name(), " returned to service", Reason(e.reason()));
    } else {
      return absl::OkStatus();
    }
    for (const auto& s : subs) {
      if (s.subscription.scope() != v1::SUBSCRIPTION_SCOPE_OPERATORS ||
          !Wants(s.subscription, kind)) {
        continue;
      }
      out.push_back(Make(s.subscription, kind, absl::StrCat("node/", e.node_name()), text,
                         FromProtoTime(e.time()), absl::StrCat("node-event/", e.id())));
    }
    return absl::OkStatus();
  };
  return PlanEvents<v1::NodeEvent>(kNodeEventsSource, node_cursor_, read, plan);
}

absl::StatusOr<int> NotificationPlanner::PlanQueueWaits() {
  std::vector<v1::Subscription> waiting;
  for (auto& s : Subscriptions()) {
    if (Wants(s.subscription, v1::NOTIFICATION_EVENT_RUN_QUEUED_TOO_LONG)) {
      waiting.push_back(std::move(s.subscription));
    }
  }
  if (waiting.empty()) return 0;
  const auto bound_of = [&](const v1::Subscription& s) {
    return s.queue_bound_seconds() > 0 ? absl::Seconds(s.queue_bound_seconds())
                                       : options_.default_queue_bound;
  };
  absl::Duration shortest = absl::InfiniteDuration();
  for (const auto& s : waiting) shortest = std::min(shortest, bound_of(s));
  const absl::Time now = clock_->Now();
  v1::RunFilter filter;
  filter.add_statuses(v1::RUN_STATUS_QUEUED);
  TESSERA_ASSIGN_OR_RETURN(auto queued, stores_.runs->ListRuns(filter));
  std::vector<store::NewNotification> out;
  for (const auto& run : queued) {
    // A run updated since the shortest bound began cannot have waited that long.
    if (now - FromProtoTime(run.updated_at()) < shortest &&
        now - FromProtoTime(run.created_at()) < shortest) {
      continue;
    }
    TESSERA_ASSIGN_OR_RETURN(auto events, stores_.runs->ListEvents(run.id(), 0, 0));
    absl::Time since = FromProtoTime(run.created_at());
    for (const auto& e : events) {
      if (e.type() == v1::RUN_EVENT_TYPE_QUEUED || e.type() == v1::RUN_EVENT_TYPE_REQUEUED) {
        since = FromProtoTime(e.time());
      }
    }
    for (const auto& s : waiting) {
      const absl::Duration bound = bound_of(s);
      if (now - since < bound || !Covers(s, run)) continue;
      out.push_back(Make(
          s, v1::NOTIFICATION_EVENT_RUN_QUEUED_TOO_LONG, absl::StrCat("run/", run.name()),
          absl::StrCat("Run ", run.name(), " has waited in the queue for ",
                       absl::FormatDuration(absl::Trunc(now - since, absl::Seconds(1))), " (over ",
                       absl::FormatDuration(bound), ")", Reason(run.status_reason())),
          since + bound, absl::StrCat("queued/", run.id(), "/", run.resumption_index())));
    }
  }
  if (out.empty()) return 0;
  TESSERA_ASSIGN_OR_RETURN(const int64_t pass, stores_.notifications->Cursor(kQueueWaitsSource));
  return stores_.notifications->Enqueue(kQueueWaitsSource, pass, pass + 1, out);
}

}  // namespace tessera::notify
