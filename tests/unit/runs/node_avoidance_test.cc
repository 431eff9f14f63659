// A run that keeps off a node after a hang or a straggler move (Run.avoid_node) may go there
// again as soon as a health sweep passes the node (RunReports::ClearNodeAvoidance), not only
// once the avoidance's while is over.
#include <catch2/catch.hpp>

#include "base/timestamps.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs {
namespace node_avoidance_test {
using testing::Fixture;

// A run with retries, moved off `node` as a straggler: requeued and keeping off it.
v1::Run MovedOff(Fixture& f, const std::string& name, const std::string& node) {
  v1::SubmitRunRequest submit;
  submit.mutable_spec()->set_name(name);
  submit.mutable_spec()->set_command("python train.py");
  submit.mutable_spec()->mutable_compute()->set_gpus(8);
  submit.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(true);
  v1::SubmitRunResponse submitted;
  REQUIRE(f.manager.SubmitRun(f.alice, submit, &submitted).ok());
  const v1::Run& run = submitted.run();
  f.Record(run, 0, v1::RUN_STATUS_QUEUED);
  f.Record(run, 0, v1::RUN_STATUS_STARTING);
  f.Record(run, 0, v1::RUN_STATUS_RUNNING);
  v1::RecordAttemptRequest moved;
  moved.mutable_attempt()->set_run_id(run.id());
  moved.mutable_attempt()->set_status(v1::RUN_STATUS_FAILED);
  moved.mutable_attempt()->set_end_reason(v1::ATTEMPT_END_REASON_STRAGGLER);
  moved.mutable_attempt()->set_first_failed_node(node);
  v1::RecordAttemptResponse resp;
  REQUIRE(f.reports.RecordAttempt(f.system, moved, &resp).ok());
  REQUIRE(resp.run().status() == v1::RUN_STATUS_QUEUED);
  REQUIRE(resp.run().avoid_node() == node);
  return resp.run();
}

v1::ClearNodeAvoidanceRequest Passed(std::vector<std::string> nodes, absl::Time at) {
  v1::ClearNodeAvoidanceRequest req;
  for (auto& n : nodes) req.add_node_names(std::move(n));
  req.set_sweep_id("sw-1");
  *req.mutable_passed_at() = ToProtoTime(at);
  return req;
}

TEST_CASE("a sweep that passes the node a run keeps off lets the run go there again") {
  Fixture f;
  const absl::Time before = f.clock->Now();
  f.clock->Advance(absl::Seconds(30));
  const v1::Run moved = MovedOff(f, "gpt", "node-b");
  const v1::Run other = MovedOff(f, "bert", "node-c");
  f.clock->Advance(absl::Seconds(40));
  v1::ClearNodeAvoidanceResponse resp;
  // A sweep of other nodes, or one that passed node-b before the run was moved off it (it says
  // nothing of what made the run straggle), changes nothing.
  REQUIRE(f.reports.ClearNodeAvoidance(f.system, Passed({"node-a"}, f.clock->Now()), &resp).ok());
  CHECK(resp.run_names().empty());
  REQUIRE(f.reports.ClearNodeAvoidance(f.system, Passed({"node-b"}, before), &resp).ok());
  CHECK(resp.run_names().empty());
  CHECK((*f.stores.runs->GetRunById(moved.id())).avoid_node() == "node-b");
  // Passed after the move: the run may be placed there again, and says why.
  REQUIRE(
      f.reports.ClearNodeAvoidance(f.system, Passed({"node-a", "node-b"}, f.clock->Now()), &resp)
          .ok());
  REQUIRE(resp.run_names_size() == 1);
  CHECK(resp.run_names(0) == moved.name());
  const v1::Run cleared = *f.stores.runs->GetRunById(moved.id());
  CHECK(cleared.avoid_node().empty());
  CHECK_FALSE(cleared.has_avoid_node_until());
  CHECK(cleared.status() == v1::RUN_STATUS_QUEUED);
  const auto events = *f.stores.runs->ListEvents(moved.id());
  REQUIRE_FALSE(events.empty());
  CHECK(events.back().type() == v1::RUN_EVENT_TYPE_NODE_CLEARED);
  CHECK(events.back().message() ==
        "node node-b passed health sweep sw-1: the run may be placed there again");
  CHECK((*f.stores.runs->GetRunById(other.id())).avoid_node() == "node-c");  // another node's
  // Told again (a retried call): nothing more.
  v1::ClearNodeAvoidanceResponse again;
  REQUIRE(f.reports.ClearNodeAvoidance(f.system, Passed({"node-b"}, f.clock->Now()), &again).ok());
  CHECK(again.run_names().empty());
  CHECK((*f.stores.runs->ListEvents(moved.id())).size() == events.size());
  // Past the avoidance's while, a pass has nothing to lift.
  f.clock->Advance(kAvoidSuspectNodeFor);
  REQUIRE(f.reports.ClearNodeAvoidance(f.system, Passed({"node-c"}, f.clock->Now()), &again).ok());
  CHECK(again.run_names().empty());
}

TEST_CASE("clearing a node's avoidance is the system's, and its request is checked") {
  Fixture f;
  v1::ClearNodeAvoidanceResponse resp;
  const absl::Time now = f.clock->Now();
  CHECK(absl::IsPermissionDenied(f.reports.ClearNodeAvoidance(f.admin, Passed({"n"}, now), &resp)));
  CHECK(absl::IsPermissionDenied(f.reports.ClearNodeAvoidance(f.alice, Passed({"n"}, now), &resp)));
  const auto error = [&](const v1::ClearNodeAvoidanceRequest& req) {
    return std::string(f.reports.ClearNodeAvoidance(f.system, req, &resp).message());
  };
  CHECK(error(Passed({}, now)) == "node_names: required");
  CHECK(error(Passed({""}, now)) == "node_names: each 1-253 bytes");
  CHECK(error(Passed({std::string(254, 'n')}, now)) == "node_names: each 1-253 bytes");
  v1::ClearNodeAvoidanceRequest no_sweep = Passed({"n"}, now);
  no_sweep.clear_sweep_id();
  CHECK(error(no_sweep) == "sweep_id: 1-128 bytes required");
  v1::ClearNodeAvoidanceRequest no_time = Passed({"n"}, now);
  no_time.clear_passed_at();
  CHECK(error(no_time) == "passed_at: required");
}

}  // namespace node_avoidance_test
}  // namespace tessera::runs
