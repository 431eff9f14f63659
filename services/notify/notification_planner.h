#pragma once
// Turns what happens into notifications, one per matching subscription (notification_store.h):
//
//   run events      FAILED, COMPLETED, STOPPED; STARTED of an attempt after the first (RESUMED),
//                   to the run owner's subscriptions and those of the run's team
//   queue waits     a run QUEUED longer than a subscription's bound, once per attempt
//   node events     CORDONED, UNCORDONED (RETURNED), to the operators' subscriptions
//
// Each source is read after its cursor. Event ids come from a database sequence, so an id can
// become visible after a higher one (its transaction commits later) or never (rolled back): a
// missing id is a gap the planner looks at again on every pass until it fills or `gap_grace`
// passes, and the stored cursor never passes an open gap (after a restart the planner reads from
// there again; the dedupe keys keep that from writing anything twice).

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/clock.h"
#include "services/store/stores.h"

namespace tessera::notify {

inline constexpr char kRunEventsSource[] = "run-events";
inline constexpr char kNodeEventsSource[] = "node-events";
inline constexpr char kQueueWaitsSource[] = "queue-waits";

struct PlannerOptions {
  absl::Duration gap_grace = absl::Seconds(30);
  int batch = 2000;  // events read per source and pass
  // A subscription's RUN_QUEUED_TOO_LONG bound when it names none.
  absl::Duration default_queue_bound = absl::Hours(1);
};

// Where a source's planning stands between passes (in memory; the cursor is stored).
class EventCursor {
 public:
  // Of `ids` (ascending, all above `stored`), those to plan now: new ones, and earlier gaps that
  // filled. Returns them; `*next_stored` is what the stored cursor may move to.
  std::vector<int64_t> Take(int64_t stored, const std::vector<int64_t>& ids, absl::Time now,
                            absl::Duration grace, int64_t* next_stored);

 private:
  int64_t high_ = 0;                    // the highest id planned by this process
  std::map<int64_t, absl::Time> gaps_;  // ids missing below high_, and since when
};

class NotificationPlanner {
 public:
  NotificationPlanner(store::Stores stores, std::shared_ptr<Clock> clock, PlannerOptions options);

  // Each plans its source once; returns how many notifications it wrote.
  absl::StatusOr<int> PlanRunEvents();
  absl::StatusOr<int> PlanNodeEvents();
  absl::StatusOr<int> PlanQueueWaits();

 private:
  template <typename Event>
  using ReadAfter = std::function<absl::StatusOr<std::vector<Event>>(int64_t after)>;
  // Adds the notifications one event makes for `subs` to `out`.
  template <typename Event>
  using PlanOne =
      std::function<absl::Status(const Event&, const std::vector<store::SubscriptionRecord>& subs,
                                 std::vector<store::NewNotification>& out)>;
  // One pass over a source of events with ids: those after the stored cursor that `state` says
  // to plan now, planned by `plan`, written with the cursor's move.
  template <typename Event>
  absl::StatusOr<int> PlanEvents(const char* source, EventCursor& state,
                                 const ReadAfter<Event>& read, const PlanOne<Event>& plan);
  std::vector<store::SubscriptionRecord> Subscriptions();
  store::NewNotification Make(const v1::Subscription& s, v1::NotificationEvent event,
                              std::string subject, std::string text, absl::Time event_time,
                              std::string dedupe_key) const;

  store::Stores stores_;
  std::shared_ptr<Clock> clock_;
  const PlannerOptions options_;
  EventCursor run_cursor_;
  EventCursor node_cursor_;
};

}  // namespace tessera::notify
