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
namespace {

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
  f.Register("n1");
  v1::Run run = f.Submit(8, false);
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.Get(run).status() == v1::RUN_STATUS_STARTING);
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

// n1 joins with a token `id` whose terms are `terms` (made and used now); the scheduler then
// holds it to them.
void JoinWithTerms(Fixture& f, const v1::NodeTerms& terms, const std::string& id = "jt-1") {
  store::JoinTokenRecord token;
  token.token.set_id(id);
  token.token.set_node("n1");
  *token.token.mutable_created_at() = ToProtoTime(f.clock->Now());
  *token.token.mutable_expires_at() = ToProtoTime(f.clock->Now() + absl::Hours(1));
  *token.token.mutable_terms() = terms;
  token.secret_hash = "hash-" + id;
  REQUIRE(f.stores.join_tokens->CreateJoinToken(token).ok());
  store::ApiKeyRecord key;
  key.key.set_id("key-" + id);
  key.key.set_user("node:n1");
  key.key.set_role(v1::ROLE_NODE);
  key.key.set_node("n1");
  key.secret_hash = "key-hash-" + id;
  REQUIRE(f.stores.join_tokens->RedeemJoinToken("hash-" + id, "n1", f.clock->Now(), key).ok());
}

TEST_CASE("a node that joined with a token cannot register into another cluster or pool") {
  Fixture f;
  v1::NodeTerms terms;
  terms.set_cluster("local");
  terms.set_gpu_type("sim");
  terms.set_max_gpus(8);
  (*terms.mutable_labels())["pool"] = "team-a";
  JoinWithTerms(f, terms);
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  (*reg.mutable_node()->mutable_labels())["pool"] = "team-b";  // where another team's runs go
  (*reg.mutable_node()->mutable_labels())["rack"] = "r7";
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  auto node = f.stores.nodes->GetNode("n1");
  REQUIRE(node.ok());
  CHECK(node->labels().at("pool") == "team-a");  // the token's word, not the node's
  CHECK(node->labels().at("rack") == "r7");      // what the terms leave to the node

  v1::RegisterWorker other_cluster = reg;
  other_cluster.mutable_node()->set_cluster("premium");
  const absl::Status moved = f.core->sessions->RegisterWorker(other_cluster).status();
  CHECK(absl::IsPermissionDenied(moved));
  CHECK(moved.message() ==
        "node n1 is held to the terms of join token jt-1, which allow cluster local; it "
        "registered with cluster premium (an admin makes a new token or key to change them)");
  v1::RegisterWorker other_gpu = reg;
  other_gpu.mutable_node()->set_gpu_type("h200");
  CHECK(absl::IsPermissionDenied(f.core->sessions->RegisterWorker(other_gpu).status()));
  v1::RegisterWorker more_gpus = reg;
  more_gpus.mutable_node()->set_gpu_count(64);
  const absl::Status grown = f.core->sessions->RegisterWorker(more_gpus).status();
  CHECK(absl::IsPermissionDenied(grown));
  CHECK_THAT(std::string(grown.message()),
             Catch::Contains("allow at most 8 GPUs; it registered with 64 GPUs"));
  // None of the refused registrations changed the node.
  node = f.stores.nodes->GetNode("n1");
  CHECK(node->cluster() == "local");
  CHECK(node->gpu_count() == 8);
  CHECK(node->incarnation() == 1);

  // A node that joined with no token (a key made otherwise) says what it is at first.
  f.Register("n2");
  CHECK(f.stores.nodes->GetNode("n2")->cluster() == "local");

  // A new token whose terms name another cluster moves n1 there: the terms are the admin's word.
  v1::NodeTerms premium = terms;
  premium.set_cluster("premium");
  f.clock->Advance(absl::Seconds(2));
  JoinWithTerms(f, premium, "jt-2");
  REQUIRE(f.core->sessions->RegisterWorker(other_cluster).ok());
  CHECK(f.stores.nodes->GetNode("n1")->cluster() == "premium");
}

TEST_CASE("a node is held to the terms of the key it calls with, before any token's") {
  Fixture f;
  v1::NodeTerms token_terms;
  token_terms.set_cluster("local");
  JoinWithTerms(f, token_terms);  // an older join, whose token said "local"
  v1::NodeTerms key_terms;
  key_terms.set_cluster("pool-a");
  key_terms.set_gpu_type("sim");
  (*key_terms.mutable_labels())["pool"] = "team-a";
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  (*reg.mutable_node()->mutable_labels())["pool"] = "team-b";
  // Its first registration already: the key's word, not the node's.
  const absl::Status first = f.core->sessions->RegisterWorker(reg, key_terms).status();
  CHECK(absl::IsPermissionDenied(first));
  CHECK(first.message() ==
        "node n1 is held to the terms of its node key, which allow cluster pool-a; it registered "
        "with cluster local (an admin makes a new token or key to change them)");
  CHECK(absl::IsNotFound(f.stores.nodes->GetNode("n1").status()));
  reg.mutable_node()->set_cluster("pool-a");
  REQUIRE(f.core->sessions->RegisterWorker(reg, key_terms).ok());
  auto node = f.stores.nodes->GetNode("n1");
  REQUIRE(node.ok());
  CHECK(node->cluster() == "pool-a");
  CHECK(node->labels().at("pool") == "team-a");
}

TEST_CASE("with require_node_terms, a node whose terms leave its pool open is refused") {
  Fixture f;
  f.config.require_node_terms = true;
  f.core = f.NewCore();
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  const absl::Status bare = f.core->sessions->RegisterWorker(reg).status();
  CHECK(absl::IsPermissionDenied(bare));
  CHECK(bare.message() ==
        "node n1 has no terms fixing its cluster and GPU type, and this scheduler takes no node's "
        "own word for them (--require-node-terms): an admin gives it a join token or node key "
        "with --cluster and --gpu-type");
  v1::NodeTerms half;
  half.set_cluster("local");  // the GPU type still the node's word
  const absl::Status open = f.core->sessions->RegisterWorker(reg, half).status();
  CHECK(absl::IsPermissionDenied(open));
  CHECK_THAT(std::string(open.message()), Catch::Contains("(its node key leaves them open)"));
  CHECK(absl::IsNotFound(f.stores.nodes->GetNode("n1").status()));
  v1::NodeTerms whole = half;
  whole.set_gpu_type("sim");
  REQUIRE(f.core->sessions->RegisterWorker(reg, whole).ok());
  CHECK(f.stores.nodes->GetNode("n1")->cluster() == "local");
}

TEST_CASE("a node without terms stays in the cluster and GPU type it first registered with") {
  Fixture f;
  f.Register("n1");  // cluster local, GPU type sim, 8 GPUs: its own word, no token
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_cluster("premium");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  const absl::Status moved = f.core->sessions->RegisterWorker(reg).status();
  CHECK(absl::IsPermissionDenied(moved));
  CHECK(
      moved.message() ==
      "node n1 registered with cluster premium; it is in cluster local since it first "
      "registered, and a node cannot move itself (an operator removes it while it is offline, "
      "`mcli admin remove-node n1`, or gives it a join token or node key whose terms say where it "
      "belongs)");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("h200");
  CHECK(absl::IsPermissionDenied(f.core->sessions->RegisterWorker(reg).status()));
  auto node = f.stores.nodes->GetNode("n1");
  CHECK(node->cluster() == "local");
  CHECK(node->gpu_type() == "sim");
  CHECK(node->incarnation() == 1);  // the refusals changed nothing
  // Its GPU count is its own (a GPU fails, or is mended).
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(7);
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  CHECK(f.stores.nodes->GetNode("n1")->gpu_count() == 7);

  // Removed while offline (as RemoveNode does), it registers anew where it says.
  REQUIRE(f.stores.nodes->DeleteNode("n1").ok());
  reg.mutable_node()->set_cluster("premium");
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  CHECK(f.stores.nodes->GetNode("n1")->cluster() == "premium");
}

}  // namespace
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace {

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

}  // namespace
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace {

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

}  // namespace
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace {

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

}  // namespace
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace {

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

}  // namespace
}  // namespace tessera::scheduler
