// Faults of Tessera itself, as the scheduler's roles see them: a database that is away, a node
// that keeps getting lost, a rank that Tessera killed or whose exit status it lost. None may cost
// a run a retry, and none may fence a healthy node.
#include <catch2/catch.hpp>
#include <map>

#include "base/timestamps.h"
#include "scheduler/service/node_liveness.h"
#include "tests/unit/scheduler_service/scheduler_fixture.h"

namespace tessera::scheduler {
namespace control_plane_faults_test {

// Places `run` and reports it started on its node; returns that node.
std::string StartRun(Fixture& f, const v1::Run& run) {
  REQUIRE(f.core->cycle->RunCycle().ok());  // admit
  REQUIRE(f.core->cycle->RunCycle().ok());  // place
  const v1::Run placed = f.Get(run);
  REQUIRE(placed.status() == v1::RUN_STATUS_STARTING);
  v1::AttemptUpdate started;
  started.set_run_id(run.id());
  started.set_resumption_index(placed.resumption_index());
  started.set_phase(v1::ATTEMPT_PHASE_STARTED);
  REQUIRE(f.core->sessions->OnAttemptUpdate(placed.nodes(0).node_name(), started).ok());
  REQUIRE(f.Get(run).status() == v1::RUN_STATUS_RUNNING);
  return placed.nodes(0).node_name();
}

// The worker's report that rank 0 of the run's first attempt ended with `exit`.
v1::AttemptUpdate Finished(const v1::Run& run, v1::RankExit exit) {
  v1::AttemptUpdate ended;
  ended.set_run_id(run.id());
  ended.set_resumption_index(0);
  ended.set_phase(v1::ATTEMPT_PHASE_FINISHED);
  exit.set_rank(0);
  *ended.add_rank_exits() = std::move(exit);
  return ended;
}

TEST_CASE("a database outage of any length renews every lease and loses no node") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/true);
  StartRun(f, run);

  f.outage->down = true;
  // Ten minutes without a database: heartbeats go on being answered, cycles fail and wait.
  for (int i = 0; i < 1200; ++i) {
    f.clock->Advance(absl::Milliseconds(500));
    REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/true)).ok());
    if (i % 10 == 0) CHECK(absl::IsUnavailable(f.core->cycle->RunCycle().status()));
  }
  f.outage->down = false;
  auto stats = f.core->cycle->RunCycle();
  REQUIRE(stats.ok());
  CHECK(stats->lost_nodes == 0);
  CHECK(f.stores.nodes->GetNode("n1")->liveness() == v1::NODE_LIVENESS_ONLINE);
  const v1::Run after = f.Get(run);
  CHECK(after.status() == v1::RUN_STATUS_RUNNING);
  CHECK(after.resumption_index() == 0);  // not one interruption
  // The node's last heartbeat reaches the store once it is back.
  CHECK(FromProtoTime(f.stores.nodes->GetNode("n1")->last_heartbeat_at()) == f.clock->Now());
}

TEST_CASE("a node silent through an outage is declared lost once the database is back") {
  Fixture f;
  f.Register("n1");
  f.outage->down = true;
  f.clock->Advance(absl::Seconds(10));
  CHECK(absl::IsUnavailable(f.core->cycle->RunCycle().status()));
  f.outage->down = false;
  auto stats = f.core->cycle->RunCycle();
  REQUIRE(stats.ok());
  CHECK(stats->lost_nodes == 1);
  CHECK(f.stores.nodes->GetNode("n1")->liveness() == v1::NODE_LIVENESS_LOST);
}

TEST_CASE(
    "a silent node is declared lost before the runs are read, its attempt ended once they are") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/true);
  StartRun(f, run);
  f.clock->Advance(absl::Seconds(3));
  // The run manager is away: the node's loss is stored all the same, at its lease's end.
  f.outage->runs_down = true;
  CHECK(absl::IsUnavailable(f.core->cycle->RunCycle().status()));
  CHECK(f.stores.nodes->GetNode("n1")->liveness() == v1::NODE_LIVENESS_LOST);
  f.outage->runs_down = false;
  REQUIRE(f.Get(run).status() == v1::RUN_STATUS_RUNNING);
  // The next cycle declares nothing again, and ends the attempt the failed one left.
  auto stats = f.core->cycle->RunCycle();
  REQUIRE(stats.ok());
  CHECK(stats->lost_nodes == 0);
  const v1::Run after = f.Get(run);
  CHECK(after.resumption_index() == 1);
  CHECK(after.status() == v1::RUN_STATUS_QUEUED);  // no other node to go to
  auto attempts = f.stores.runs->ListAttempts(run.id());
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 2);
  const v1::Attempt& first = (*attempts)[0];
  CHECK(first.end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK(first.detection_method() == v1::DETECTION_METHOD_LEASE_EXPIRY);
  CHECK(first.reason() == "node n1 was lost");
}

TEST_CASE(
    "heartbeats write nothing to the store and every node's last one is stored in one write") {
  Fixture f;
  for (int i = 0; i < 50; ++i) f.Register("n" + std::to_string(i));
  REQUIRE(f.core->cycle->RunCycle().ok());
  std::map<std::string, int64_t> versions;
  for (int i = 0; i < 50; ++i) {
    const std::string name = "n" + std::to_string(i);
    versions[name] = f.stores.nodes->GetNode(name)->version();
  }
  const int writes = f.node_store->heartbeat_writes;
  const auto beat_all = [&] {
    for (int i = 0; i < 50; ++i) {
      REQUIRE(f.core->sessions->Heartbeat("n" + std::to_string(i), {}).ok());
    }
  };
  for (int i = 0; i < 20; ++i) {  // 10 s of heartbeats and cycles
    f.clock->Advance(absl::Milliseconds(500));
    beat_all();
    REQUIRE(f.core->cycle->RunCycle().ok());
  }
  CHECK(f.node_store->heartbeat_writes == writes);
  f.clock->Advance(absl::Seconds(5));  // 15 s since registration: the persist interval
  beat_all();
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.node_store->heartbeat_writes == writes + 1);  // one write for all fifty
  for (int i = 0; i < 50; ++i) {
    auto node = f.stores.nodes->GetNode("n" + std::to_string(i));
    CHECK(node->version() ==
          versions[node->name()]);  // a summary, not a state change: no new version
    CHECK(FromProtoTime(node->last_heartbeat_at()) == f.clock->Now());
    CHECK(FromProtoTime(node->lease_expires_at()) == f.clock->Now() + absl::Seconds(3));
  }
}

TEST_CASE("the cycle reads the nodes again only when a node's state changed") {
  Fixture f;
  f.core = f.NewCore(f.stores.changes);
  for (int i = 0; i < 3; ++i) f.Register("n" + std::to_string(i));
  REQUIRE(f.core->cycle->RunCycle().ok());
  const int reads = f.node_store->list_reads;
  for (int i = 0; i < 40; ++i) {  // 20 s: heartbeats, and their summary stored once
    f.clock->Advance(absl::Milliseconds(500));
    for (int n = 0; n < 3; ++n)
      REQUIRE(f.core->sessions->Heartbeat("n" + std::to_string(n), {}).ok());
    REQUIRE(f.core->cycle->RunCycle().ok());
  }
  CHECK(f.node_store->list_reads == reads);
  CHECK(FromProtoTime(f.stores.nodes->GetNode("n1")->last_heartbeat_at()) >
        f.clock->Now() - absl::Seconds(16));
  // An operator cordons n1 (another process): the next cycle reads the nodes, and places
  // nothing there.
  auto n1 = f.stores.nodes->GetNode("n1");
  REQUIRE(n1.ok());
  n1->set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  REQUIRE(f.stores.nodes->UpdateNode(*n1, n1->version(), {}).ok());
  f.Submit(8, false);
  f.Submit(8, false);
  f.Submit(8, false);
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.node_store->list_reads == reads + 1);
  int started_on_n1 = 0;
  for (const auto& [node, m] : f.sent) {
    if (node == "n1" && m.has_start_attempt()) ++started_on_n1;
  }
  CHECK(started_on_n1 == 0);
  // A cycle that fails reads them again next time.
  f.outage->down = true;
  CHECK_FALSE(f.core->cycle->RunCycle().ok());
  f.outage->down = false;
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.node_store->list_reads == reads + 2);
}

TEST_CASE("an attempt on a lost node whose end is refused does not stop the cycle") {
  Fixture f;
  f.Register("n1");
  f.Register("n2");
  v1::Run run = f.Submit(8, /*retry=*/true);
  const std::string lost = StartRun(f, run);
  const std::string other = lost == "n1" ? "n2" : "n1";
  f.clock->Advance(absl::Milliseconds(2999));
  REQUIRE(f.core->sessions->Heartbeat(other, {}).ok());
  f.clock->Advance(absl::Milliseconds(1));
  f.outage->refuse_records = true;
  auto stats = f.core->cycle->RunCycle();
  REQUIRE(stats.ok());  // logged and skipped: other runs still get placed
  CHECK(stats->lost_nodes == 1);
  CHECK(f.Get(run).resumption_index() == 0);
  f.outage->refuse_records = false;
  REQUIRE(f.core->sessions->Heartbeat(other, {}).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());  // tried again from the stored LOST
  const v1::Run requeued = f.Get(run);
  CHECK(requeued.resumption_index() == 1);
  REQUIRE(requeued.nodes_size() == 1);
  CHECK(requeued.nodes(0).node_name() == other);
}

TEST_CASE("a node lost in a cycle gets nothing in that cycle") {
  Fixture f;
  f.core = f.NewCore(f.stores.changes);
  f.Register("n1");
  f.Register("n2");
  v1::Run first = f.Submit(8, /*retry=*/true);
  const std::string lost = StartRun(f, first);
  const std::string other = lost == "n1" ? "n2" : "n1";
  v1::Run second = f.Submit(8, /*retry=*/false);
  REQUIRE(f.core->cycle->RunCycle().ok());  // admit
  REQUIRE(f.core->cycle->RunCycle().ok());  // place
  REQUIRE(f.Get(second).nodes(0).node_name() == other);
  // The first run's node falls silent. Requeued, the run would fit only there (it is free
  // now): the cycle's kept placement index must know that it was just lost.
  f.clock->Advance(absl::Milliseconds(2999));
  REQUIRE(f.core->sessions->Heartbeat(other, {}).ok());
  f.clock->Advance(absl::Milliseconds(1));
  auto stats = f.core->cycle->RunCycle();
  REQUIRE(stats.ok());
  CHECK(stats->lost_nodes == 1);
  const v1::Run requeued = f.Get(first);
  CHECK(requeued.resumption_index() == 1);
  CHECK(requeued.status() == v1::RUN_STATUS_QUEUED);
  CHECK(requeued.nodes_size() == 0);
}

TEST_CASE("a node lost three times in ten minutes is cordoned with the evidence") {
  Fixture f;
  for (int loss = 1; loss <= 3; ++loss) {
    f.Register("n1");
    REQUIRE(f.core->cycle->RunCycle().ok());
    f.clock->Advance(absl::Seconds(3));
    auto stats = f.core->cycle->RunCycle();
    REQUIRE(stats.ok());
    REQUIRE(stats->lost_nodes == 1);
    const v1::Node node = *f.stores.nodes->GetNode("n1");
    CHECK(node.liveness() == v1::NODE_LIVENESS_LOST);
    if (loss < 3) {
      CHECK(node.admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
    } else {
      CHECK(node.admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
      CHECK(node.status_reason().rfind(kFlapCordonPrefix, 0) == 0);
      CHECK(node.status_reason().find("lost 3 times") != std::string::npos);
    }
    f.clock->Advance(absl::Minutes(1));
  }
  // Back again, it gets no runs: it stays cordoned until an operator decides.
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_QUEUED);
  v1::NodeEventFilter filter;
  filter.add_node_names("n1");
  filter.add_types(v1::NODE_EVENT_TYPE_CORDONED);
  auto events = f.stores.node_events->ListNodeEvents(filter);
  REQUIRE(events.ok());
  CHECK(events->size() == 1);
}

TEST_CASE("losses spread wider than the window do not cordon a node") {
  Fixture f;
  for (int loss = 1; loss <= 4; ++loss) {
    f.Register("n1");
    REQUIRE(f.core->cycle->RunCycle().ok());
    f.clock->Advance(absl::Seconds(3));
    REQUIRE(f.core->cycle->RunCycle()->lost_nodes == 1);
    f.clock->Advance(absl::Minutes(6));
  }
  CHECK(f.stores.nodes->GetNode("n1")->admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
}

TEST_CASE("a rank Tessera fenced or lost the status of requeues the run without using a retry") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/false);  // no retries at all: a user failure would fail it
  const std::string node = StartRun(f, run);
  v1::RankExit exit;
  exit.set_exit_code(-1);
  exit.set_control_plane_fault(true);
  REQUIRE(f.core->sessions->OnAttemptUpdate(node, Finished(run, exit)).ok());

  const v1::Run after = f.Get(run);
  CHECK(after.status() == v1::RUN_STATUS_QUEUED);
  CHECK(after.resumption_index() == 1);
  CHECK(after.retries_used() == 0);
  CHECK(after.control_plane_interruptions() == 1);
  auto attempts = f.stores.runs->ListAttempts(run.id());
  REQUIRE(attempts.ok());
  REQUIRE(!attempts->empty());
  CHECK(attempts->front().end_reason() == v1::ATTEMPT_END_REASON_CONTROL_PLANE);
}

TEST_CASE("the same exit without Tessera's mark is the user's failure") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/false);
  const std::string node = StartRun(f, run);
  v1::RankExit exit;
  exit.set_exit_code(137);
  exit.set_signal(9);
  REQUIRE(f.core->sessions->OnAttemptUpdate(node, Finished(run, exit)).ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_FAILED);
}

TEST_CASE(
    "ranks that exit at a straggler move's stop before the move records its end: the move's") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/true);
  const std::string node = StartRun(f, run);
  // The health API moves the run off its straggler: the stop goes out first, and the worker's
  // report of SIGTERM's exit arrives before the move's own end is recorded.
  f.core->control->StopAttempt(f.Get(run), v1::ATTEMPT_END_REASON_STRAGGLER,
                               "2.0 x the median step time of the run's other nodes", node,
                               v1::DETECTION_METHOD_STRAGGLER_WATCH);
  v1::RankExit exit;
  exit.set_exit_code(143);
  exit.set_signal(15);
  REQUIRE(f.core->sessions->OnAttemptUpdate(node, Finished(run, exit)).ok());
  const v1::Run after = f.Get(run);
  CHECK(after.status() == v1::RUN_STATUS_QUEUED);  // not FAILED with exit code 143
  CHECK(after.resumption_index() == 1);
  CHECK(after.avoid_node() == node);
  auto attempts = f.stores.runs->ListAttempts(run.id());
  REQUIRE(attempts.ok());
  REQUIRE(!attempts->empty());
  CHECK(attempts->front().end_reason() == v1::ATTEMPT_END_REASON_STRAGGLER);
  CHECK(attempts->front().detection_method() == v1::DETECTION_METHOD_STRAGGLER_WATCH);
  CHECK(attempts->front().reason() == "2.0 x the median step time of the run's other nodes");
  CHECK(attempts->front().first_failed_node() == node);
  // The move's own record, arriving second, is no news.
  REQUIRE(f.core->control
              ->EndAttempt(run.id(), 0, AttemptState{}, v1::ATTEMPT_END_REASON_STRAGGLER,
                           v1::DETECTION_METHOD_STRAGGLER_WATCH, "again")
              .ok());
  CHECK(f.Get(run).resumption_index() == 1);
}

}  // namespace control_plane_faults_test
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace control_plane_faults_test {

int CountSent(const Fixture& f, v1::ControlMessage::BodyCase body) {
  int n = 0;
  for (const auto& [node, m] : f.sent) n += m.body_case() == body ? 1 : 0;
  return n;
}

TEST_CASE("a start lost on the wire is sent again within two heartbeats, and only until it lands") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(CountSent(f, v1::ControlMessage::kStartAttempt) == 1);
  f.sent.clear();  // the start never reached the worker

  f.clock->Advance(absl::Milliseconds(500));
  REQUIRE(f.core->sessions->Heartbeat("n1", {}).ok());
  CHECK(CountSent(f, v1::ControlMessage::kStartAttempt) == 0);  // it may still be on its way
  f.clock->Advance(absl::Milliseconds(500));
  REQUIRE(f.core->sessions->Heartbeat("n1", {}).ok());
  REQUIRE(CountSent(f, v1::ControlMessage::kStartAttempt) == 1);
  const v1::StartAttempt& again = f.sent.back().second.start_attempt();
  CHECK(again.run_id() == run.id());
  CHECK(again.resumption_index() == 0);

  // Once the worker lists the attempt, nothing more is sent.
  f.sent.clear();
  for (int i = 0; i < 6; ++i) {
    f.clock->Advance(absl::Milliseconds(500));
    REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/true)).ok());
  }
  CHECK(CountSent(f, v1::ControlMessage::kStartAttempt) == 0);
  CHECK(f.Get(run).status() == v1::RUN_STATUS_RUNNING);
}

TEST_CASE("a start for a node whose stream was elsewhere goes with its first heartbeat here") {
  Fixture f;
  f.Register("n1");
  // The stream went to another instance (or is reconnecting): nothing can be sent to it here.
  f.workers->Attach("n1", [](const v1::ControlMessage&) { return false; });
  v1::Run run = f.Submit(8, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.Get(run).status() == v1::RUN_STATUS_STARTING);
  CHECK(CountSent(f, v1::ControlMessage::kStartAttempt) == 0);
  f.Register("n1");  // it reconnects here
  f.clock->Advance(absl::Milliseconds(500));
  REQUIRE(f.core->sessions->Heartbeat("n1", {}).ok());
  CHECK(CountSent(f, v1::ControlMessage::kStartAttempt) == 1);
}

TEST_CASE("a stop lost on the wire is sent again while the ranks still run") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/true);
  StartRun(f, run);
  v1::StopRunRequest stop;
  stop.set_name(run.name());
  v1::StopRunResponse resp;
  REQUIRE(f.manager.StopRun({"alice", v1::ROLE_USER}, stop, &resp).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(CountSent(f, v1::ControlMessage::kStopAttempt) == 1);
  f.sent.clear();  // lost

  f.clock->Advance(absl::Milliseconds(500));
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/true)).ok());
  CHECK(CountSent(f, v1::ControlMessage::kStopAttempt) == 0);
  f.clock->Advance(absl::Milliseconds(500));
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/true)).ok());
  CHECK(CountSent(f, v1::ControlMessage::kStopAttempt) == 1);
  f.clock->Advance(absl::Milliseconds(500));
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/true)).ok());
  CHECK(CountSent(f, v1::ControlMessage::kStopAttempt) == 1);  // not at every heartbeat
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/false, 143)).ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_STOPPED);
}

}  // namespace control_plane_faults_test
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace control_plane_faults_test {

TEST_CASE("the cycle lists runs without their parameters, and the start still carries them") {
  Fixture f;
  f.Register("n1");
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("big");
  req.mutable_spec()->set_command("x");
  req.mutable_spec()->mutable_compute()->set_gpus(8);
  // 900 kB of parameters: six such runs overflowed every cycle's reply before.
  (*req.mutable_spec()->mutable_parameters()->mutable_fields())["blob"].set_string_value(
      std::string(900'000, 'p'));
  v1::SubmitRunResponse resp;
  REQUIRE(f.manager.SubmitRun({"alice", v1::ROLE_USER}, req, &resp).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.sent.size() == 1);
  const v1::StartAttempt& start = f.sent[0].second.start_attempt();
  CHECK(start.parameters_json().size() > 900'000);
  CHECK(start.parameters_json().find("pppp") != std::string::npos);
}

}  // namespace control_plane_faults_test
}  // namespace tessera::scheduler
