// The scheduler's roles together (the leader's cycle and the worker sessions over one attempt
// tracker) with memory stores, a fake clock and the run manager called directly: leases,
// placement and recovery are checked exactly, without sleeps.
#include "scheduler/service/scheduler.h"

#include <google/protobuf/util/json_util.h>

#include <catch2/catch.hpp>

#include "base/timestamps.h"
#include "services/common/node_labels.h"
#include "tests/unit/scheduler_service/scheduler_fixture.h"

namespace tessera::scheduler {
namespace scheduler_test {

TEST_CASE("a node whose lease expires is lost at exactly the lease, and its run requeued") {
  Fixture f;
  f.Register("n1");
  f.Register("n2");
  v1::Run run = f.Submit(8, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());  // admit
  REQUIRE(f.core->cycle->RunCycle().ok());  // place
  v1::Run placed = f.Get(run);
  REQUIRE(placed.status() == v1::RUN_STATUS_STARTING);
  const std::string node = placed.nodes(0).node_name();
  const std::string other = node == "n1" ? "n2" : "n1";

  // The other node keeps heartbeating; this one goes silent.
  f.clock->Advance(absl::Milliseconds(2999));
  REQUIRE(f.core->sessions->Heartbeat(other, {}).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.stores.nodes->GetNode(node)->liveness() == v1::NODE_LIVENESS_ONLINE);
  f.clock->Advance(absl::Milliseconds(1));
  auto stats = f.core->cycle->RunCycle();
  REQUIRE(stats.ok());
  CHECK(stats->lost_nodes == 1);
  CHECK(f.stores.nodes->GetNode(node)->liveness() == v1::NODE_LIVENESS_LOST);
  CHECK(f.stores.nodes->GetNode(other)->liveness() == v1::NODE_LIVENESS_ONLINE);
  v1::Run requeued = f.Get(run);
  CHECK(requeued.resumption_index() == 1);
  // Requeued and, in the same cycle, placed again on the node that is still alive.
  CHECK(requeued.status() == v1::RUN_STATUS_STARTING);
  REQUIRE(requeued.nodes_size() == 1);
  CHECK(requeued.nodes(0).node_name() == other);
  // A late heartbeat from the lost node is refused: it must register again.
  CHECK(absl::IsFailedPrecondition(f.core->sessions->Heartbeat(node, {}).status()));
}

TEST_CASE("after a scheduler restart, heartbeats recover the started and finished reports") {
  Fixture f;
  v1::Run run = f.PlaceOne("n1");
  REQUIRE(f.sent.size() == 1);
  CHECK(f.sent[0].second.has_start_attempt());

  // A new instance knows nothing of the reports the old one would have received.
  f.core = f.NewCore();
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/true)).ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_RUNNING);
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/false, 0)).ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_COMPLETED);
  // Repeating the heartbeat changes nothing.
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, false, 0)).ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_COMPLETED);
}

TEST_CASE("exited ranks whose last lines are still being shipped are not taken for a missed end") {
  Fixture f;
  v1::Run run = f.PlaceOne("n1");
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/true)).ok());
  REQUIRE(f.Get(run).status() == v1::RUN_STATUS_RUNNING);
  // The worker holds FINISHED until the log service has the ranks' output: the run is not
  // over yet for anyone (a follower of its logs would stop too soon).
  v1::Heartbeat shipping = f.Beat(run, /*running=*/false, 0);
  shipping.mutable_attempts(0)->set_logs_pending(true);
  REQUIRE(f.core->sessions->Heartbeat("n1", shipping).ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_RUNNING);
  // Shipped: the next heartbeat recovers the end if its FINISHED was missed.
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/false, 0)).ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_COMPLETED);
}

TEST_CASE("re-registration keeps what operators decided and counts incarnations") {
  Fixture f;
  f.Register("n1");
  auto node = f.stores.nodes->GetNode("n1");
  REQUIRE(node.ok());
  CHECK(node->incarnation() == 1);
  v1::Node cordoned = *node;
  cordoned.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  REQUIRE(f.stores.nodes->UpdateNode(cordoned, node->version(), {}).ok());
  f.Register("n1");
  node = f.stores.nodes->GetNode("n1");
  CHECK(node->incarnation() == 2);
  CHECK(node->admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  v1::RegisterWorker bad;
  CHECK(absl::IsInvalidArgument(f.core->sessions->RegisterWorker(bad).status()));
}

TEST_CASE("a re-registering node cannot change the labels a person set, only its own") {
  Fixture f;
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  (*reg.mutable_node()->mutable_labels())["rack"] = "r1";
  (*reg.mutable_node()->mutable_labels())["pool"] = "team-a";
  // A node cannot forge the record of what people set.
  (*reg.mutable_node()->mutable_labels())[kOperatorLabelKeysLabel] = "rack";
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  CHECK(f.stores.nodes->GetNode("n1")->labels().count(kOperatorLabelKeysLabel) == 0);

  // An operator moves the node to team b (as SetNodeLabels does, through NodeApi).
  v1::SetNodeLabelsRequest label;
  label.set_name("n1");
  (*label.mutable_labels())["pool"] = "team-b";
  v1::SetNodeLabelsResponse labelled;
  REQUIRE(f.core->node_api->SetNodeLabels({"root", v1::ROLE_ADMIN}, label, &labelled).ok());

  // The node comes back saying team a, a new rack and a new label: it keeps team b.
  (*reg.mutable_node()->mutable_labels())["rack"] = "r2";
  (*reg.mutable_node()->mutable_labels())["nvlink"] = "yes";
  (*reg.mutable_node()->mutable_labels())[kOperatorLabelKeysLabel] = "";
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  auto node = f.stores.nodes->GetNode("n1");
  REQUIRE(node.ok());
  CHECK(node->labels().at("pool") == "team-b");
  CHECK(node->labels().at("rack") == "r2");  // the node's own: it may change it
  CHECK(node->labels().at("nvlink") == "yes");
  CHECK(node->labels().at(kOperatorLabelKeysLabel) == "pool");

  // Once the operator removes their label, the node's word counts again.
  (*label.mutable_labels())["pool"] = "";
  REQUIRE(f.core->node_api->SetNodeLabels({"root", v1::ROLE_ADMIN}, label, &labelled).ok());
  CHECK(labelled.node().labels().count(kOperatorLabelKeysLabel) == 0);
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  CHECK(f.stores.nodes->GetNode("n1")->labels().at("pool") == "team-a");
}

}  // namespace scheduler_test
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace scheduler_test {

TEST_CASE("ranks lost with a restarted worker end the attempt as a node failure, not the user's") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  v1::AttemptUpdate started;
  started.set_run_id(run.id());
  started.set_phase(v1::ATTEMPT_PHASE_STARTED);
  REQUIRE(f.core->sessions->OnAttemptUpdate("n1", started).ok());
  REQUIRE(f.Get(run).status() == v1::RUN_STATUS_RUNNING);

  v1::AttemptUpdate lost;
  lost.set_run_id(run.id());
  lost.set_phase(v1::ATTEMPT_PHASE_LOST);
  lost.set_detail("killed 8 rank(s)");
  auto* e = lost.add_rank_exits();
  e->set_rank(0);
  e->set_signal(9);
  e->set_exit_code(137);
  REQUIRE(f.core->sessions->OnAttemptUpdate("n1", lost).ok());
  v1::Run requeued = f.Get(run);
  CHECK(requeued.resumption_index() == 1);  // retried: not a user failure
  auto attempts = f.stores.runs->ListAttempts(run.id());
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() >= 1);
  CHECK((*attempts)[0].end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK((*attempts)[0].reason().find("restarted") != std::string::npos);
}

TEST_CASE("a heartbeat that says an attempt was lost is enough when the update was missed") {
  Fixture f;
  f.Register("n1");
  v1::Run run = f.Submit(8, /*retry=*/false);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(run, /*running=*/true)).ok());
  v1::Heartbeat hb = f.Beat(run, /*running=*/false, 137);
  hb.mutable_attempts(0)->set_lost(true);
  REQUIRE(f.core->sessions->Heartbeat("n1", hb).ok());
  v1::Run ended = f.Get(run);
  // No retries asked for: the run fails, but as a node failure.
  CHECK(ended.status() == v1::RUN_STATUS_FAILED);
  auto attempts = f.stores.runs->ListAttempts(run.id());
  REQUIRE(attempts.ok());
  CHECK((*attempts)[0].end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
}

}  // namespace scheduler_test
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace scheduler_test {

// Places a 16-GPU run on two of three 8-GPU nodes and lets one of its nodes go silent; returns
// the run and the name of the surviving node of attempt 0.
std::pair<v1::Run, std::string> LoseOneNodeOfTwo(Fixture& f) {
  f.Register("n1");
  f.Register("n2");
  f.Register("n3");
  v1::Run run = f.Submit(16, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  v1::Run placed = f.Get(run);
  REQUIRE(placed.nodes_size() == 2);
  const std::string lost = placed.nodes(0).node_name(), survivor = placed.nodes(1).node_name();
  std::string idle;
  for (const char* n : {"n1", "n2", "n3"}) {
    if (n != lost && n != survivor) idle = n;
  }
  f.clock->Advance(absl::Seconds(3));
  REQUIRE(f.core->sessions->Heartbeat(survivor, {}).ok());
  REQUIRE(f.core->sessions->Heartbeat(idle, {}).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.stores.nodes->GetNode(lost)->liveness() == v1::NODE_LIVENESS_LOST);
  return {run, survivor};
}

TEST_CASE("the next attempt waits until the previous one's ranks have exited everywhere") {
  Fixture f;
  auto [run, survivor] = LoseOneNodeOfTwo(f);
  // Requeued, but the survivor still runs attempt 0's ranks (they are stopping): not placed.
  v1::Run waiting = f.Get(run);
  CHECK(waiting.resumption_index() == 1);
  CHECK(waiting.status() == v1::RUN_STATUS_QUEUED);
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_QUEUED);

  // The survivor reports attempt 0 finished: now the run is placed.
  v1::AttemptUpdate finished;
  finished.set_run_id(run.id());
  finished.set_resumption_index(0);
  finished.set_phase(v1::ATTEMPT_PHASE_FINISHED);
  REQUIRE(f.core->sessions->OnAttemptUpdate(survivor, finished).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  v1::Run placed = f.Get(run);
  CHECK(placed.status() == v1::RUN_STATUS_STARTING);
  CHECK(placed.resumption_index() == 1);
}

TEST_CASE("a heartbeat without the old attempt's ranks also ends the wait") {
  Fixture f;
  auto [run, survivor] = LoseOneNodeOfTwo(f);
  v1::Heartbeat hb;
  auto* a = hb.add_attempts();
  a->set_run_id(run.id());
  a->set_resumption_index(0);
  a->add_exited_ranks()->set_rank(8);
  REQUIRE(f.core->sessions->Heartbeat(survivor, hb).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_STARTING);
}

TEST_CASE("a node that never confirms is waited for one stop grace and one lease, no longer") {
  Fixture f;
  auto [run, survivor] = LoseOneNodeOfTwo(f);
  // Everyone keeps heartbeating, but the survivor never says its ranks are gone.
  for (int i = 0; i < 25; ++i) {
    f.clock->Advance(absl::Milliseconds(500));
    for (const char* n : {"n1", "n2", "n3"}) (void)f.core->sessions->Heartbeat(n, {});
    REQUIRE(f.core->cycle->RunCycle().ok());
    CHECK(f.Get(run).status() == v1::RUN_STATUS_QUEUED);  // 12.5 s < 10 s grace + 3 s lease
  }
  f.clock->Advance(absl::Milliseconds(500));
  for (const char* n : {"n1", "n2", "n3"}) (void)f.core->sessions->Heartbeat(n, {});
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.Get(run).status() == v1::RUN_STATUS_STARTING);
}

}  // namespace scheduler_test
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace scheduler_test {

TEST_CASE("ranks per node: one per GPU, else the run's procs_per_node, else the node's label") {
  Fixture f;
  f.workers->Attach("cpu1", [&f](const v1::ControlMessage& m) {
    f.sent.emplace_back("cpu1", m);
    return true;
  });
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("cpu1");
  reg.mutable_node()->set_cluster("local");
  (*reg.mutable_node()->mutable_labels())[std::string(kProcsPerNodeLabel)] = "3";
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());

  auto start_of = [&](int procs_per_node) {
    v1::SubmitRunRequest req;
    req.mutable_spec()->set_name("cpu");
    req.mutable_spec()->set_command("x");
    req.mutable_spec()->mutable_compute()->set_gpus(0);
    req.mutable_spec()->mutable_compute()->set_nodes(1);
    req.mutable_spec()->mutable_compute()->set_procs_per_node(procs_per_node);
    v1::SubmitRunResponse resp;
    REQUIRE(f.manager.SubmitRun({"alice", v1::ROLE_USER}, req, &resp).ok());
    f.sent.clear();
    REQUIRE(f.core->cycle->RunCycle().ok());
    REQUIRE(f.core->cycle->RunCycle().ok());
    REQUIRE(f.sent.size() == 1);
    v1::StartAttempt s = f.sent[0].second.start_attempt();
    // Finish it so the node is free for the next case.
    v1::AttemptUpdate done;
    done.set_run_id(s.run_id());
    done.set_phase(v1::ATTEMPT_PHASE_FINISHED);
    REQUIRE(f.core->sessions->OnAttemptUpdate("cpu1", done).ok());
    return s;
  };
  v1::StartAttempt by_label = start_of(0);
  CHECK(by_label.local_world_size() == 3);
  CHECK(by_label.world_size() == 3);
  CHECK(by_label.gpu_indices_size() == 0);
  v1::StartAttempt by_run = start_of(2);
  CHECK(by_run.local_world_size() == 2);
}

TEST_CASE("the run's parameters reach the ranks as exactly their JSON") {
  Fixture f;
  f.Register("n1");
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("p");
  req.mutable_spec()->set_command("x");
  req.mutable_spec()->mutable_compute()->set_gpus(1);
  auto& fields = *req.mutable_spec()->mutable_parameters()->mutable_fields();
  fields["lr"].set_number_value(0.5);
  fields["max_duration"].set_string_value("60ba");
  v1::SubmitRunResponse resp;
  REQUIRE(f.manager.SubmitRun({"alice", v1::ROLE_USER}, req, &resp).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.sent.size() == 1);
  google::protobuf::Struct got;
  REQUIRE(google::protobuf::util::JsonStringToMessage(
              f.sent[0].second.start_attempt().parameters_json(), &got)
              .ok());
  CHECK(got.fields().size() == 2);
  CHECK(got.fields().at("lr").number_value() == 0.5);
  CHECK(got.fields().at("max_duration").string_value() == "60ba");
}

}  // namespace scheduler_test
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace scheduler_test {

TEST_CASE("a node's notes reach only the attempts placed on it now") {
  Fixture f;
  f.Register("n1");
  f.Register("n2");
  v1::Run run = f.Submit(8, /*retry=*/false);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  run = f.Get(run);
  REQUIRE(run.nodes_size() == 1);
  const std::string placed = run.nodes(0).node_name();
  const std::string other = placed == "n1" ? "n2" : "n1";
  const auto note = [&](const std::string& text, int resumption) {
    v1::AttemptUpdate u;
    u.set_run_id(run.id());
    u.set_resumption_index(resumption);
    u.set_phase(v1::ATTEMPT_PHASE_PREPARING);
    u.set_detail(text);
    return u;
  };
  REQUIRE(f.core->sessions->OnAttemptUpdate(placed, note("pulling the image", 0)).ok());
  // Another node, or an attempt that is not the run's current one: dropped, not an error (the
  // stream goes on).
  REQUIRE(f.core->sessions->OnAttemptUpdate(other, note("forged by a neighbour", 0)).ok());
  REQUIRE(f.core->sessions->OnAttemptUpdate(placed, note("about a later attempt", 1)).ok());
  auto events = f.stores.runs->ListEvents(run.id());
  REQUIRE(events.ok());
  bool pulled = false;
  for (const auto& e : *events) {
    pulled |= e.message() == "pulling the image on " + placed;
    CHECK_FALSE(absl::StrContains(e.message(), "forged"));
    CHECK_FALSE(absl::StrContains(e.message(), "later attempt"));
  }
  CHECK(pulled);
}

}  // namespace scheduler_test
}  // namespace tessera::scheduler
