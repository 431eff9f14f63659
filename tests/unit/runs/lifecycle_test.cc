#include "services/runs/lifecycle.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "base/timestamps.h"

namespace tessera::runs {
namespace lifecycle_test {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

v1::Run NewRun() {
  v1::Run r;
  r.set_id("run-1");
  r.set_name("train-abcd");
  r.set_status(v1::RUN_STATUS_PENDING);
  r.set_resumption_index(-1);
  *r.mutable_created_at() = ToProtoTime(kT0);
  return r;
}

v1::Attempt Update(int index, v1::RunStatus status,
                   v1::AttemptEndReason reason = v1::ATTEMPT_END_REASON_UNSPECIFIED) {
  v1::Attempt a;
  a.set_run_id("run-1");
  a.set_resumption_index(index);
  a.set_status(status);
  a.set_end_reason(reason);
  a.set_first_failed_rank(-1);
  return a;
}

// Drives the run through a sequence of updates, each a second apart, returning the last result.
struct Driver {
  v1::Run run = NewRun();
  std::optional<v1::Attempt> current;
  absl::Time now = kT0;
  std::vector<std::string> messages;

  Transition Apply(const v1::Attempt& u) {
    now += absl::Seconds(1);
    auto t = ApplyAttemptUpdate(run, current, u, now);
    REQUIRE(t.ok());
    run = t->run;
    for (const auto& e : t->events) messages.push_back(e.message());
    for (const auto& a : t->attempts) {
      if (a.resumption_index() == run.resumption_index()) current = a;
    }
    return *t;
  }
  void StartAttempt(int index) {
    if (index == 0) Apply(Update(0, v1::RUN_STATUS_QUEUED));
    v1::Attempt placed = Update(index, v1::RUN_STATUS_STARTING);
    placed.add_nodes()->set_node_name("node-a");
    Apply(placed);
    Apply(Update(index, v1::RUN_STATUS_RUNNING));
  }
};

TEST_CASE("a run goes PENDING, QUEUED, STARTING, RUNNING, COMPLETED with its events") {
  Driver d;
  d.StartAttempt(0);
  CHECK(d.run.status() == v1::RUN_STATUS_RUNNING);
  CHECK(d.run.pending_seconds() == 1);  // queued at t+1, placed at t+2
  d.Apply(Update(0, v1::RUN_STATUS_COMPLETED, v1::ATTEMPT_END_REASON_SUCCEEDED));
  CHECK(d.run.status() == v1::RUN_STATUS_COMPLETED);
  CHECK(d.run.running_seconds() == 1);
  CHECK(d.messages == std::vector<std::string>{"Run queued", "Run placed on node-a", "Run started",
                                               "Run completed"});
}

TEST_CASE("a user's non-zero exit fails the run with the exit code") {
  Driver d;
  d.StartAttempt(0);
  v1::Attempt end = Update(0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_USER_EXIT);
  end.set_first_failed_rank(3);
  end.set_first_failed_node("node-a");
  auto* exit = end.add_rank_exits();
  exit->set_rank(3);
  exit->set_exit_code(7);
  d.Apply(end);
  CHECK(d.run.status() == v1::RUN_STATUS_FAILED);
  CHECK(d.messages.back() == "Run failed with exit code 7 (rank 3 on node-a)");
}

TEST_CASE("exit codes the run names are retried against max_retries, others fail the run") {
  Driver d;
  d.run.mutable_spec()->mutable_scheduling()->add_retry_on_exit_codes(134);
  d.run.mutable_spec()->mutable_scheduling()->set_max_retries(1);
  auto exit_with = [](int index, int code, int signal) {
    v1::Attempt end = Update(index, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_USER_EXIT);
    end.set_first_failed_rank(0);
    end.set_first_failed_node("node-a");
    auto* exit = end.add_rank_exits();
    exit->set_rank(0);
    exit->set_exit_code(code);
    exit->set_signal(signal);
    return end;
  };
  d.StartAttempt(0);
  d.Apply(exit_with(0, 0, 6));  // SIGABRT: 128 + 6
  CHECK(d.run.status() == v1::RUN_STATUS_QUEUED);
  CHECK(d.run.retries_used() == 1);
  CHECK(d.messages[d.messages.size() - 2] ==
        "Attempt failed with exit code 134 (rank 0 on node-a), which "
        "scheduling.retry_on_exit_codes retries (retry 1 of 1)");
  d.StartAttempt(1);
  d.Apply(exit_with(1, 134, 0));
  CHECK(d.run.status() == v1::RUN_STATUS_FAILED);
  CHECK(d.messages.back() ==
        "Run failed with exit code 134 (rank 0 on node-a) after all 1 retries");

  Driver other;
  other.run.mutable_spec()->mutable_scheduling()->add_retry_on_exit_codes(134);
  other.StartAttempt(0);
  other.Apply(exit_with(0, 1, 0));  // not a code it named: fails at once
  CHECK(other.run.status() == v1::RUN_STATUS_FAILED);
  CHECK(other.run.retries_used() == 0);
}

TEST_CASE("a node failure requeues while retries are left, then fails") {
  Driver d;
  d.run.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(true);
  d.run.mutable_spec()->mutable_scheduling()->set_max_retries(1);
  d.StartAttempt(0);
  v1::Attempt lost = Update(0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  lost.set_first_failed_node("node-a");
  auto t = d.Apply(lost);
  CHECK(d.run.status() == v1::RUN_STATUS_QUEUED);
  CHECK(d.run.resumption_index() == 1);
  CHECK(d.run.retries_used() == 1);
  REQUIRE(t.attempts.size() == 2);
  CHECK(t.attempts[0].end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK(t.attempts[1].resumption_index() == 1);
  CHECK(t.attempts[1].status() == v1::RUN_STATUS_QUEUED);
  CHECK(d.messages[d.messages.size() - 2] == "Run was stopped due to node failure (node-a)");
  CHECK(d.messages.back() == "Run placed back in the scheduling queue");

  d.StartAttempt(1);
  d.Apply(Update(1, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_GPU_FAULT));
  CHECK(d.run.status() == v1::RUN_STATUS_FAILED);
  CHECK(d.messages.back() == "Run failed: a system failure after all 1 retries");
}

TEST_CASE(
    "after a hang the run keeps off the hung rank's node for a while, whatever ends its attempts "
    "meanwhile") {
  Driver d;
  d.run.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(true);
  d.StartAttempt(0);
  v1::Attempt hung = Update(0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_HANG);
  hung.set_first_failed_node("node-a");
  d.Apply(hung);
  REQUIRE(d.run.status() == v1::RUN_STATUS_QUEUED);
  CHECK(d.run.avoid_node() == "node-a");
  CHECK(FromProtoTime(d.run.avoid_node_until()) == d.now + kAvoidSuspectNodeFor);
  const absl::Time until = d.now + kAvoidSuspectNodeFor;
  // Another node lost meanwhile: the hung node is still being checked, and still avoided.
  d.StartAttempt(1);
  v1::Attempt lost = Update(1, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  lost.set_first_failed_node("node-b");
  d.Apply(lost);
  REQUIRE(d.run.status() == v1::RUN_STATUS_QUEUED);
  CHECK(d.run.avoid_node() == "node-a");
  CHECK(FromProtoTime(d.run.avoid_node_until()) == until);
  // Past its while, the next requeue forgets it.
  d.StartAttempt(2);
  d.now = until;
  v1::Attempt again = Update(2, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  again.set_first_failed_node("node-c");
  d.Apply(again);
  REQUIRE(d.run.status() == v1::RUN_STATUS_QUEUED);
  CHECK(d.run.avoid_node().empty());
  CHECK_FALSE(d.run.has_avoid_node_until());
}

TEST_CASE(
    "a run moved off a straggler keeps off it for a while, and a failed node is not avoided") {
  Driver d;
  d.run.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(true);
  d.StartAttempt(0);
  v1::Attempt moved = Update(0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_STRAGGLER);
  moved.set_first_failed_node("node-b");
  d.Apply(moved);
  REQUIRE(d.run.status() == v1::RUN_STATUS_QUEUED);
  CHECK(d.run.avoid_node() == "node-b");
  CHECK(FromProtoTime(d.run.avoid_node_until()) == d.now + kAvoidSuspectNodeFor);
  Driver other;
  other.run.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(true);
  other.StartAttempt(0);
  v1::Attempt lost = Update(0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  lost.set_first_failed_node("node-b");
  other.Apply(lost);
  REQUIRE(other.run.status() == v1::RUN_STATUS_QUEUED);
  CHECK(other.run.avoid_node().empty());
}

TEST_CASE("retry limits: off by default, 10 when on, max_retries overrides") {
  v1::RunSpec spec;
  CHECK(RetryLimit(spec) == 0);
  spec.mutable_scheduling()->set_retry_on_system_failure(true);
  CHECK(RetryLimit(spec) == 10);
  spec.mutable_scheduling()->set_max_retries(3);
  CHECK(RetryLimit(spec) == 3);
}

TEST_CASE("preemption requeues without using a retry") {
  Driver d;
  d.StartAttempt(0);
  d.Apply(Update(0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_PREEMPTED));
  CHECK(d.run.status() == v1::RUN_STATUS_QUEUED);
  CHECK(d.run.retries_used() == 0);
  CHECK(d.run.resumption_index() == 1);
  CHECK(d.messages[d.messages.size() - 2] == "Run was preempted");
  // The scheduler says why; the event carries it.
  d.StartAttempt(1);
  v1::Attempt reclaimed = Update(1, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_PREEMPTED);
  reclaimed.set_reason("to return borrowed GPUs (team a is over its quota; team b needs them)");
  d.Apply(reclaimed);
  CHECK(d.messages[d.messages.size() - 2] ==
        "Run was preempted to return borrowed GPUs (team a is over its quota; team b needs them)");
}

TEST_CASE("a node failing its pre-flight checks requeues without a retry, up to a cap") {
  Driver d;
  d.Apply(Update(0, v1::RUN_STATUS_QUEUED));
  for (int index = 0; index <= kMaxPreflightFailures; ++index) {
    v1::Attempt placed = Update(index, v1::RUN_STATUS_STARTING);
    placed.add_nodes()->set_node_name("node-a");
    d.Apply(placed);
    v1::Attempt failed =
        Update(index, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_PREFLIGHT_FAILED);
    failed.set_reason("node-a failed its pre-flight checks (shm: 0.01 GiB free)");
    d.Apply(failed);
    if (index < kMaxPreflightFailures) {
      REQUIRE(d.run.status() == v1::RUN_STATUS_QUEUED);
      CHECK(d.run.retries_used() == 0);
      CHECK(d.run.preflight_failures() == index + 1);
    }
  }
  CHECK(d.run.status() == v1::RUN_STATUS_FAILED);
  CHECK(d.run.status_reason() == "20 attempts whose nodes failed their pre-flight checks");
  CHECK(std::find(d.messages.begin(), d.messages.end(),
                  "Attempt did not start: node-a failed its pre-flight checks (shm: 0.01 GiB "
                  "free); the node is cordoned and the run placed elsewhere (not counted against "
                  "max_retries)") != d.messages.end());
}

TEST_CASE("stale, backwards and repeated reports are refused or ignored") {
  Driver d;
  d.StartAttempt(0);
  CHECK(absl::IsFailedPrecondition(
      ApplyAttemptUpdate(d.run, d.current, Update(0, v1::RUN_STATUS_STARTING), d.now).status()));
  CHECK(absl::IsFailedPrecondition(
      ApplyAttemptUpdate(d.run, d.current, Update(5, v1::RUN_STATUS_RUNNING), d.now).status()));
  auto repeated = ApplyAttemptUpdate(d.run, d.current, Update(0, v1::RUN_STATUS_RUNNING), d.now);
  REQUIRE(repeated.ok());
  CHECK_FALSE(repeated->changed);
  CHECK(absl::IsInvalidArgument(
      ApplyAttemptUpdate(d.run, d.current, Update(0, v1::RUN_STATUS_PENDING), d.now).status()));
}

TEST_CASE("stop: queued runs stop at once, running ones go TERMINATING then STOPPED") {
  Driver queued;
  queued.Apply(Update(0, v1::RUN_STATUS_QUEUED));
  Transition t = RequestStop(queued.run, queued.current, "alice", "", kT0);
  CHECK(t.run.status() == v1::RUN_STATUS_STOPPED);
  REQUIRE(t.attempts.size() == 1);
  CHECK(t.attempts[0].end_reason() == v1::ATTEMPT_END_REASON_STOPPED);
  CHECK(t.events.back().message() == "Run stopped: stopped by alice");

  Driver running;
  running.StartAttempt(0);
  t = RequestStop(running.run, running.current, "alice", "wrong lr", kT0);
  CHECK(t.run.status() == v1::RUN_STATUS_TERMINATING);
  CHECK(t.run.stop_requested());
  CHECK(t.events.back().message() == "Stop requested: wrong lr (alice)");
  running.run = t.run;
  // Even a node failure while terminating ends as STOPPED, not requeued.
  running.Apply(Update(0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE));
  CHECK(running.run.status() == v1::RUN_STATUS_STOPPED);
  CHECK(running.messages.back() == "Run stopped: wrong lr (alice)");
  CHECK_FALSE(RequestStop(running.run, running.current, "alice", "", kT0).changed);
}

}  // namespace lifecycle_test
}  // namespace tessera::runs
