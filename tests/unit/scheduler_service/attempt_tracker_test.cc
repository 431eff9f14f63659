// The attempt tracker alone: what worker reports do to an attempt's books, stops sent once, and
// how ended attempts drain, with a fake clock.
#include "scheduler/service/attempt_tracker.h"

#include <catch2/catch.hpp>

namespace tessera::scheduler {
namespace attempt_tracker_test {

v1::Run RunOn(const std::string& id, int resumption, std::vector<std::string> nodes) {
  v1::Run run;
  run.set_id(id);
  run.set_resumption_index(resumption);
  for (const auto& n : nodes) run.add_nodes()->set_node_name(n);
  return run;
}

v1::AttemptUpdate Update(const std::string& run, v1::AttemptPhase phase, int rank = -1,
                         int exit_code = 0) {
  v1::AttemptUpdate u;
  u.set_run_id(run);
  u.set_phase(phase);
  if (rank >= 0) {
    auto* e = u.add_rank_exits();
    e->set_rank(rank);
    e->set_exit_code(exit_code);
  }
  return u;
}

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  AttemptTracker tracker{clock, absl::Seconds(13)};
};

TEST_CASE(
    "attempt tracker: the first start, the first failure and the last finish are named once") {
  Fixture f;
  f.tracker.SetActive({RunOn("r", 0, {"a", "b"})});
  auto started = f.tracker.Record("a", Update("r", v1::ATTEMPT_PHASE_STARTED));
  REQUIRE(started.ok());
  CHECK(started->effect == AttemptReport::Effect::kRecorded);
  CHECK(started->first_start);
  CHECK_FALSE(f.tracker.Record("b", Update("r", v1::ATTEMPT_PHASE_STARTED))->first_start);
  REQUIRE(f.tracker.ReportsFrom("r", 0, "a").has_value());
  CHECK(f.tracker.ReportsFrom("r", 0, "a")->started);
  CHECK_FALSE(f.tracker.ReportsFrom("r", 0, "a")->finished);
  CHECK_FALSE(f.tracker.ReportsFrom("r", 1, "a").has_value());  // not the active attempt

  auto failed = f.tracker.Record("b", Update("r", v1::ATTEMPT_PHASE_RANK_EXITED, 1, 3));
  REQUIRE(failed.ok());
  CHECK(failed->newly_failed);
  CHECK_FALSE(failed->all_finished);
  CHECK(failed->state.first_failed_rank == 1);
  CHECK(failed->state.first_failed_node == "b");
  // A later failure is not the first.
  CHECK_FALSE(
      f.tracker.Record("a", Update("r", v1::ATTEMPT_PHASE_RANK_EXITED, 0, 1))->newly_failed);

  CHECK_FALSE(f.tracker.Record("a", Update("r", v1::ATTEMPT_PHASE_FINISHED))->all_finished);
  auto last = f.tracker.Record("b", Update("r", v1::ATTEMPT_PHASE_FINISHED));
  CHECK(last->all_finished);
  CHECK(last->state.exits.size() == 2);
  CHECK(last->state.finished == std::set<std::string>{"a", "b"});
  CHECK(f.tracker.ReportsFrom("r", 0, "b")->finished);
}

TEST_CASE("attempt tracker: ranks lost with their worker are never the user's failure") {
  Fixture f;
  f.tracker.SetActive({RunOn("r", 0, {"a"})});
  auto lost = f.tracker.Record("a", Update("r", v1::ATTEMPT_PHASE_LOST, 0, 137));
  REQUIRE(lost.ok());
  CHECK(lost->all_finished);
  CHECK_FALSE(lost->newly_failed);
  CHECK(lost->state.first_failed_rank == -1);
  CHECK(lost->state.exits.size() == 1);
}

TEST_CASE("attempt tracker: a failure after the control plane's stop is not the first failure") {
  Fixture f;
  f.tracker.SetActive({RunOn("r", 0, {"a"})});
  CHECK_FALSE(f.tracker.StopSent("r", 0));
  REQUIRE(f.tracker.MarkStopping("r", 0, v1::ATTEMPT_END_REASON_PREEMPTED));
  CHECK(f.tracker.StopSent("r", 0));
  CHECK_FALSE(f.tracker.MarkStopping("r", 0, v1::ATTEMPT_END_REASON_STOPPED));  // once
  auto exited = f.tracker.Record("a", Update("r", v1::ATTEMPT_PHASE_FINISHED, 0, 143));
  CHECK_FALSE(exited->newly_failed);
  CHECK(exited->state.stop_reason == v1::ATTEMPT_END_REASON_PREEMPTED);
  CHECK(exited->state.stop_sent_at == f.clock->Now());
  CHECK(exited->state.stop_node.empty());
  // A stop that blames a node, with how it was found, is remembered as the attempt's end; one
  // whose caller names neither (a node's worker restarted, say) is not.
  f.tracker.SetActive({RunOn("s", 0, {"a"}), RunOn("t", 0, {"a"})});
  REQUIRE(f.tracker.MarkStopping("s", 0, v1::ATTEMPT_END_REASON_STRAGGLER, "2.0 x", "a",
                                 v1::DETECTION_METHOD_STRAGGLER_WATCH));
  auto moved = f.tracker.Record("a", Update("s", v1::ATTEMPT_PHASE_FINISHED, 0, 143));
  CHECK_FALSE(moved->newly_failed);
  CHECK(moved->state.stop_reason == v1::ATTEMPT_END_REASON_STRAGGLER);
  CHECK(moved->state.stop_detail == "2.0 x");
  CHECK(moved->state.stop_node == "a");
  CHECK(moved->state.stop_detection == v1::DETECTION_METHOD_STRAGGLER_WATCH);
  REQUIRE(f.tracker.MarkStopping("t", 0, v1::ATTEMPT_END_REASON_NODE_FAILURE, "restarted"));
  auto restarted = f.tracker.Record("a", Update("t", v1::ATTEMPT_PHASE_FINISHED, 0, 143));
  CHECK(restarted->newly_failed);
  CHECK(restarted->state.stop_reason == v1::ATTEMPT_END_REASON_UNSPECIFIED);
}

TEST_CASE("attempt tracker: reports on attempts that are not active change nothing") {
  Fixture f;
  f.tracker.SetActive({RunOn("r", 1, {"a"})});
  // An older attempt's start, and a run nobody knows.
  CHECK(f.tracker.Record("a", Update("r", v1::ATTEMPT_PHASE_STARTED))->effect ==
        AttemptReport::Effect::kNotActive);
  CHECK(f.tracker.Record("a", Update("x", v1::ATTEMPT_PHASE_RANK_EXITED, 0, 1))->effect ==
        AttemptReport::Effect::kNotActive);
  CHECK(f.tracker.Record("a", Update("x", v1::ATTEMPT_PHASE_FINISHED))->effect ==
        AttemptReport::Effect::kDrained);
  v1::AttemptUpdate no_phase = Update("r", v1::ATTEMPT_PHASE_UNSPECIFIED);
  no_phase.set_resumption_index(1);
  CHECK(absl::IsInvalidArgument(f.tracker.Record("a", no_phase).status()));
  CHECK(f.tracker.State("r", 1).started.empty());
}

TEST_CASE("attempt tracker: an ended attempt drains on its unconfirmed nodes until the limit") {
  Fixture f;
  f.tracker.SetActive({RunOn("r", 0, {"a", "b", "c"})});
  REQUIRE(f.tracker.Record("a", Update("r", v1::ATTEMPT_PHASE_FINISHED)).ok());
  f.tracker.Ended("r", 0, /*finished=*/{"b"}, /*succeeded=*/false);
  CHECK_FALSE(f.tracker.IsActive("r"));
  auto draining = f.tracker.Draining();
  REQUIRE(draining.size() == 1);
  REQUIRE(draining[0].nodes_size() == 1);  // a finished before, b as the caller saw
  CHECK(draining[0].nodes(0).node_name() == "c");

  f.clock->Advance(absl::Seconds(12));
  CHECK(f.tracker.Draining().size() == 1);
  f.clock->Advance(absl::Seconds(1));
  CHECK(f.tracker.Draining().empty());  // the limit passed: placed again anyway
}

TEST_CASE("attempt tracker: draining ends when every node confirms, or is lost") {
  Fixture f;
  f.tracker.SetActive({RunOn("r", 0, {"a", "b"}), RunOn("s", 2, {"b"})});
  f.tracker.Ended("r", 0, {}, false);
  f.tracker.Ended("s", 2, {}, false);
  f.tracker.NodeDrained("r", 0, "a");
  f.tracker.NodeDrained("r", 1, "b");  // another attempt's report changes nothing
  CHECK(f.tracker.Draining().size() == 2);
  f.tracker.NodeLost("b");
  CHECK(f.tracker.Draining().empty());
}

TEST_CASE("attempt tracker: a succeeded attempt does not drain, and placements are counted") {
  Fixture f;
  f.tracker.Placed(RunOn("r", 0, {"a"}));
  CHECK(f.tracker.placements_total() == 1);
  CHECK(f.tracker.ActiveRun("r", 0).has_value());
  CHECK_FALSE(f.tracker.ActiveRun("r", 1).has_value());
  f.tracker.Ended("r", 0, {}, /*succeeded=*/true);
  CHECK(f.tracker.Draining().empty());
  CHECK_FALSE(f.tracker.ActiveRun("r", 0).has_value());
}

TEST_CASE("attempt tracker: a new active set forgets the books of attempts that left it") {
  Fixture f;
  f.tracker.SetActive({RunOn("r", 0, {"a"})});
  REQUIRE(f.tracker.Record("a", Update("r", v1::ATTEMPT_PHASE_STARTED)).ok());
  f.tracker.LearnActive({RunOn("r", 5, {"z"}), RunOn("s", 0, {"b"})});  // keeps what it knows
  CHECK(f.tracker.ActiveRun("r", 0).has_value());
  CHECK(f.tracker.ActiveRun("s", 0).has_value());
  f.tracker.SetActive({RunOn("r", 1, {"a"})});
  CHECK(f.tracker.State("r", 0).started.empty());
  CHECK_FALSE(f.tracker.IsActive("s"));
}

}  // namespace attempt_tracker_test
}  // namespace tessera::scheduler
