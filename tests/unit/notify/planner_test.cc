// NotificationPlanner against memory stores and a fake clock: which events become which
// notifications, once, for whom; queue waits; gaps in event ids.
#include "tests/unit/notify/notify_fixture.h"

namespace tessera::notify {
namespace planner_test {
using namespace notify_test;  // NOLINT: the fixture is these tests' vocabulary

TEST_CASE("run events become notifications for the owner's and the team's subscriptions") {
  Fixture f;
  f.AddTeam("nlp");
  REQUIRE(f.stores.teams->AddMember("nlp", "bob").ok());
  const std::string alice =
      f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER,
                  {v1::NOTIFICATION_EVENT_RUN_FAILED, v1::NOTIFICATION_EVENT_RUN_RESUMED});
  const std::string team =
      f.Subscribe(kBob, v1::SUBSCRIPTION_SCOPE_TEAM, {v1::NOTIFICATION_EVENT_RUN_COMPLETED}, "nlp");
  f.Run("gpt-a", "alice", "nlp");
  f.Run("gpt-c", "carol");
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_STARTED);     // a first start: not a resumption
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_STARTED, 1);  // resumed
  f.Event("gpt-c", v1::RUN_EVENT_TYPE_FAILED);      // carol's: nobody's subscription
  f.Event("gpt-a", v1::RUN_EVENT_TYPE_COMPLETED);   // the team's
  CHECK(*f.planner.PlanRunEvents() == 2);
  CHECK(*f.planner.PlanRunEvents() == 0);  // planned once
  const auto all = f.All();
  REQUIRE(all.size() == 2);
  CHECK(all[0].subscription_id() == alice);
  CHECK(all[0].owner() == "alice");
  CHECK(all[0].event() == v1::NOTIFICATION_EVENT_RUN_RESUMED);
  CHECK(all[0].subject() == "run/gpt-a");
  CHECK(all[0].text() == "Run gpt-a resumed: attempt 2 started");
  CHECK(all[1].subscription_id() == team);
  CHECK(all[1].text() == "Run gpt-a completed");
  // A new planner (a restart, another instance) starts from the stored cursor: nothing again.
  NotificationPlanner again(f.stores, f.clock, PlannerOptions{});
  CHECK(*again.PlanRunEvents() == 0);
}

TEST_CASE("a loss rollback is told to the subscriptions that ask for it, in the event's words") {
  Fixture f;
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_ROLLED_BACK});
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_FAILED});
  f.Run("gpt-r", "alice");
  f.Event("gpt-r", v1::RUN_EVENT_TYPE_LOSS_ROLLBACK, 0,
          "Loss rollback 1 of 3: the loss is nan at step 25; training went back to the "
          "checkpoint of step 20 and skips that step's batch");
  CHECK(*f.planner.PlanRunEvents() == 1);  // the rollback's subscription only
  const auto all = f.All();
  REQUIRE(all.size() == 1);
  CHECK(all[0].event() == v1::NOTIFICATION_EVENT_RUN_ROLLED_BACK);
  CHECK(all[0].text() ==
        "Run gpt-r: Loss rollback 1 of 3: the loss is nan at step 25; training went back to the "
        "checkpoint of step 20 and skips that step's batch");
}

TEST_CASE("node events go to the operators' subscriptions only") {
  Fixture f;
  const std::string ops =
      f.Subscribe(kOps, v1::SUBSCRIPTION_SCOPE_OPERATORS,
                  {v1::NOTIFICATION_EVENT_NODE_CORDONED, v1::NOTIFICATION_EVENT_NODE_RETURNED});
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_FAILED});
  for (auto type : {v1::NODE_EVENT_TYPE_CORDONED, v1::NODE_EVENT_TYPE_DRAINING,
                    v1::NODE_EVENT_TYPE_UNCORDONED}) {
    v1::NodeEvent e;
    e.set_node_name("node-7");
    e.set_type(type);
    e.set_reason(type == v1::NODE_EVENT_TYPE_CORDONED ? "health: XID 79" : "");
    REQUIRE(f.stores.node_events->AppendNodeEvent(e).ok());
  }
  CHECK(*f.planner.PlanNodeEvents() == 2);
  const auto all = f.All();
  REQUIRE(all.size() == 2);
  CHECK(all[0].subscription_id() == ops);
  CHECK(all[0].text() == "Node node-7 cordoned: health: XID 79");
  CHECK(all[1].text() == "Node node-7 returned to service");
  CHECK(all[1].subject() == "node/node-7");
}

TEST_CASE("a run waiting in the queue past a subscription's bound is told once per attempt") {
  Fixture f;
  f.Subscribe(kAlice, v1::SUBSCRIPTION_SCOPE_USER, {v1::NOTIFICATION_EVENT_RUN_QUEUED_TOO_LONG}, "",
              600);
  f.Run("gpt-q", "alice");
  f.clock->Advance(absl::Seconds(599));
  CHECK(*f.planner.PlanQueueWaits() == 0);
  f.clock->Advance(absl::Seconds(2));
  CHECK(*f.planner.PlanQueueWaits() == 1);
  f.clock->Advance(absl::Seconds(60));
  CHECK(*f.planner.PlanQueueWaits() == 0);  // the same attempt: once
  const auto all = f.All();
  REQUIRE(all.size() == 1);
  CHECK(all[0].text() == "Run gpt-q has waited in the queue for 10m1s (over 10m)");
}

TEST_CASE("an event id that shows up late is planned, one that never does is waited for a while") {
  EventCursor cursor;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  int64_t stored = 0;
  // 3 is missing (its transaction has not committed): 4 and 5 are planned, the cursor stays at 2.
  CHECK(cursor.Take(0, {1, 2, 4, 5}, t0, absl::Seconds(30), &stored) ==
        std::vector<int64_t>{1, 2, 4, 5});
  CHECK(stored == 2);
  // 3 commits: planned, and the cursor moves past everything.
  CHECK(cursor.Take(2, {3, 4, 5, 6}, t0 + absl::Seconds(1), absl::Seconds(30), &stored) ==
        std::vector<int64_t>{3, 6});
  CHECK(stored == 6);
  // 7 never comes (rolled back): after the grace the cursor moves on.
  CHECK(cursor.Take(6, {8}, t0 + absl::Seconds(2), absl::Seconds(30), &stored) ==
        std::vector<int64_t>{8});
  CHECK(stored == 6);
  CHECK(cursor.Take(6, {8}, t0 + absl::Seconds(20), absl::Seconds(30), &stored).empty());
  CHECK(stored == 6);
  CHECK(cursor.Take(6, {8}, t0 + absl::Seconds(33), absl::Seconds(30), &stored).empty());
  CHECK(stored == 8);
}

}  // namespace planner_test
}  // namespace tessera::notify
