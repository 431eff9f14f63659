// Hot spares: which idle nodes each pool keeps, what they are sent to warm up and what their
// answers do, and the scheduler's roles together placing a run that lost a node on the spare
// (and the node it kept) while ordinary runs never go there.
#include "scheduler/service/spare_nodes.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "proto/policy/preflight.h"
#include "scheduler/service/utilization.h"
#include "tests/unit/scheduler_service/scheduler_fixture.h"
#include "tests/unit/scheduler_service/spare_test_nodes.h"

namespace tessera::scheduler {
namespace spare_nodes_test {

TEST_CASE(
    "each pool keeps its spares among its idle, schedulable nodes, the same ones while it can") {
  std::vector<v1::Node> nodes = {SpareTestNode("a1", "a100"), SpareTestNode("a2", "a100"),
                                 SpareTestNode("a3", "a100", /*spare=*/true),
                                 SpareTestNode("h1", "h100"), SpareTestNode("h2", "h100")};
  // a3 was a spare: it stays one; h100's first by name.
  CHECK(ChooseSpares(nodes, {}, {}, 1) == std::set<std::string>{"a3", "h1"});
  CHECK(ChooseSpares(nodes, {}, {}, 2) == std::set<std::string>{"a1", "a3", "h1", "h2"});
  CHECK(ChooseSpares(nodes, {}, {}, 0).empty());
  // Busy, suspected, cordoned or lost nodes are never spares; a pool without idle ones has none.
  nodes[3].set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  nodes[4].set_liveness(v1::NODE_LIVENESS_LOST);
  CHECK(ChooseSpares(nodes, {"a3"}, {"a1"}, 1) == std::set<std::string>{"a2"});
  // Another GPU count is another pool.
  nodes.push_back(SpareTestNode("a4", "a100"));
  nodes.back().set_gpu_count(4);
  CHECK(ChooseSpares(nodes, {"a3"}, {"a1"}, 1) == std::set<std::string>{"a2", "a4"});
}

TEST_CASE("a spare holds the images of its pool's running runs, not the host's or other pools'") {
  const std::vector<v1::Node> nodes = {SpareTestNode("a1", "a100"), SpareTestNode("h1", "h100")};
  std::vector<v1::Run> active(4);
  const char* images[] = {"reg/train:1", "host", "reg/eval:2", "reg/queued:3"};
  const char* on[] = {"a1", "a1", "h1", "a1"};
  for (size_t i = 0; i < active.size(); ++i) {
    active[i].set_id("r" + std::to_string(i));
    active[i].set_status(i == 3 ? v1::RUN_STATUS_TERMINATING : v1::RUN_STATUS_RUNNING);
    active[i].mutable_spec()->set_image(images[i]);
    active[i].set_image_digest("sha256:" + std::to_string(i));
    active[i].add_nodes()->set_node_name(on[i]);
  }
  const auto by_pool = PoolImages(active, nodes);
  const auto& a100 = by_pool.at(PoolOf(nodes[0]));
  REQUIRE(a100.size() == 1);
  CHECK(a100.begin()->image == "reg/train:1");
  CHECK(a100.begin()->digest == "sha256:0");
  CHECK(a100.begin()->run_id == "r0");
  CHECK(by_pool.at(PoolOf(nodes[1])).begin()->image == "reg/eval:2");
}

TEST_CASE("only a run requeued after a node fault resumes on spares") {
  v1::Run run;
  run.set_status(v1::RUN_STATUS_QUEUED);
  for (auto reason : {v1::ATTEMPT_END_REASON_NODE_FAILURE, v1::ATTEMPT_END_REASON_GPU_FAULT,
                      v1::ATTEMPT_END_REASON_HANG, v1::ATTEMPT_END_REASON_STRAGGLER,
                      v1::ATTEMPT_END_REASON_PREFLIGHT_FAILED}) {
    run.set_requeued_after(reason);
    CHECK(ResumesAfterNodeFault(run));
  }
  for (auto reason : {v1::ATTEMPT_END_REASON_UNSPECIFIED, v1::ATTEMPT_END_REASON_PREEMPTED,
                      v1::ATTEMPT_END_REASON_RESIZED, v1::ATTEMPT_END_REASON_CONTROL_PLANE}) {
    run.set_requeued_after(reason);
    CHECK_FALSE(ResumesAfterNodeFault(run));
  }
  run.set_requeued_after(v1::ATTEMPT_END_REASON_NODE_FAILURE);
  run.set_status(v1::RUN_STATUS_RUNNING);
  CHECK_FALSE(ResumesAfterNodeFault(run));
}

struct SpareFixture : Fixture {
  SpareFixture() {
    config.spares_per_pool = 1;
    config.spare_warm_timeout = absl::Minutes(10);
    core = NewCore();
    for (const char* n : {"n1", "n2", "n3"}) Register(n);
  }
  v1::Run SubmitTwoNodes(const std::string& image) {
    v1::SubmitRunRequest req;
    req.mutable_spec()->set_name("big");
    req.mutable_spec()->set_command("x");
    req.mutable_spec()->set_image(image);
    req.mutable_spec()->mutable_compute()->set_gpus(16);
    req.mutable_spec()->mutable_compute()->set_nodes(2);
    req.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(true);
    v1::SubmitRunResponse resp;
    REQUIRE(manager.SubmitRun({"alice", v1::ROLE_USER}, req, &resp).ok());
    return resp.run();
  }
  // n1 becomes the spare, and a two-node run starts on n2 and n3.
  v1::Run TwoNodesBesideTheSpare(const std::string& image = "host") {
    REQUIRE(core->cycle->RunCycle().ok());
    const v1::Run big = SubmitTwoNodes(image);
    Second({"n1", "n2", "n3"});
    Second({"n1", "n2", "n3"});
    REQUIRE(Get(big).status() == v1::RUN_STATUS_STARTING);
    return big;
  }
  // A preemptible run of one node, of a higher priority than any resumption.
  v1::Run SubmitBorrower() {
    v1::SubmitRunRequest req;
    req.mutable_spec()->set_name("borrower");
    req.mutable_spec()->set_command("x");
    req.mutable_spec()->mutable_compute()->set_gpus(8);
    req.mutable_spec()->mutable_scheduling()->set_preemptible(true);
    req.mutable_spec()->mutable_scheduling()->set_priority(v1::PRIORITY_HIGH);
    v1::SubmitRunResponse resp;
    const auto accepted = manager.SubmitRun({"alice", v1::ROLE_OPERATOR}, req, &resp);
    INFO(accepted.ToString());
    REQUIRE(accepted.ok());
    return resp.run();
  }
  // A second passes; the named nodes beat with nothing running; one cycle.
  void Second(std::initializer_list<const char*> beating) {
    clock->Advance(absl::Seconds(1));
    for (const char* node : beating) REQUIRE(core->sessions->Heartbeat(node, {}).ok());
    REQUIRE(core->cycle->RunCycle().ok());
  }
  // The warm-ups sent to `node`, in order.
  std::vector<v1::ControlMessage> Warms(const std::string& node) const {
    std::vector<v1::ControlMessage> out;
    for (const auto& [to, m] : sent) {
      if (to == node && m.has_warm_spare()) out.push_back(m);
    }
    return out;
  }
  void Answer(const v1::ControlMessage& warm, const std::string& error) {
    v1::CommandAck ack;
    ack.set_command_id(warm.command_id());
    ack.set_ok(error.empty());
    ack.set_error(error);
    workers->OnAck(ack);
  }
  v1::Node Node(const std::string& name) { return *stores.nodes->GetNode(name); }
};

TEST_CASE("a spare is chosen, warmed with its pool's images, and ready once it answers") {
  SpareFixture f;
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.Node("n1").spare());
  CHECK(absl::StartsWith(f.Node("n1").spare_status(), "warming: "));
  CHECK_FALSE(f.Node("n2").spare());
  auto warms = f.Warms("n1");
  REQUIRE(warms.size() == 1);
  CHECK(warms[0].warm_spare().images_size() == 0);  // nothing runs yet: its checks only
  CHECK(warms[0].warm_spare().gpu_indices_size() == 8);

  // A run starts on the two other nodes: the spare is sent its image, with only its owner's
  // credentials for the image's registry.
  for (const char* server : {"registry.example", "other.example"}) {
    v1::SecretValue& s = f.run_secrets->emplace_back();
    s.mutable_secret()->set_type(v1::SECRET_TYPE_DOCKER_REGISTRY);
    s.mutable_secret()->set_server(server);
    s.set_value(std::string("token-for-") + server);
  }
  v1::SecretValue& env = f.run_secrets->emplace_back();
  env.mutable_secret()->set_type(v1::SECRET_TYPE_ENVIRONMENT);
  env.set_value("never-to-a-spare");
  const v1::Run run = f.SubmitTwoNodes("registry.example/team/train:1");
  f.Second({"n1", "n2", "n3"});
  f.Second({"n1", "n2", "n3"});
  const v1::Run placed = f.Get(run);
  REQUIRE(placed.status() == v1::RUN_STATUS_STARTING);
  for (const auto& n : placed.nodes()) CHECK(n.node_name() != "n1");
  warms = f.Warms("n1");
  REQUIRE(warms.size() == 2);
  REQUIRE(warms[1].warm_spare().images_size() == 1);
  CHECK(warms[1].warm_spare().images(0).image() == "registry.example/team/train:1");
  REQUIRE(warms[1].warm_spare().images(0).registry_credentials_size() == 1);
  CHECK(warms[1].warm_spare().images(0).registry_credentials(0).value() ==
        "token-for-registry.example");
  // The first answer came too late to count: only the latest warm-up's does.
  f.Answer(warms[0], "");
  f.Second({"n1", "n2", "n3"});
  CHECK(absl::StartsWith(f.Node("n1").spare_status(), "warming: "));
  f.Answer(warms[1], "");
  f.Second({"n1", "n2", "n3"});
  CHECK(f.Node("n1").spare_status() ==
        "ready: 1 image of its pool's running runs pulled, pre-flight checks passed");
  CHECK(f.Warms("n1").size() == 2);  // nothing new to send

  // Its worker registers again (a restart): warmed again.
  f.Register("n1");
  f.Second({"n1", "n2", "n3"});
  CHECK(f.Warms("n1").size() == 3);

  // mcli util: the spare's GPUs are not free to anything else.
  const auto nodes = *f.stores.nodes->ListNodes({});
  const v1::GetUtilizationResponse util = Utilization({f.Get(run)}, nodes, f.clock->Now(), "");
  REQUIRE(util.clusters_size() == 1);
  CHECK(util.clusters(0).nodes_spare() == 1);
  CHECK(util.clusters(0).gpus_spare() == 8);
  CHECK(util.clusters(0).gpus_free() == 0);
}

TEST_CASE("an unanswered warm-up is sent again after the timeout, a failed pull is not ready") {
  SpareFixture f;
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.Warms("n1").size() == 1);
  f.clock->Advance(absl::Minutes(9));
  for (const char* n : {"n1", "n2", "n3"}) REQUIRE(f.core->sessions->Heartbeat(n, {}).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.Warms("n1").size() == 1);
  f.clock->Advance(absl::Minutes(1));
  for (const char* n : {"n1", "n2", "n3"}) REQUIRE(f.core->sessions->Heartbeat(n, {}).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  const auto warms = f.Warms("n1");
  REQUIRE(warms.size() == 2);
  f.Answer(warms[1], "images not pulled: reg/x:1: unauthorized");
  f.Second({"n1", "n2", "n3"});
  CHECK(f.Node("n1").spare());
  CHECK(f.Node("n1").spare_status() == "not ready: images not pulled: reg/x:1: unauthorized");
}

TEST_CASE("a spare whose pre-flight checks fail is cordoned, and another node takes its place") {
  SpareFixture f;
  REQUIRE(f.core->cycle->RunCycle().ok());
  const auto warms = f.Warms("n1");
  REQUIRE(warms.size() == 1);
  f.Answer(warms[0], std::string(kSpareChecksFailedPrefix) + "shm: /dev/shm has 0.06 GiB free");
  f.Second({"n1", "n2", "n3"});
  const v1::Node n1 = f.Node("n1");
  CHECK(n1.admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(n1.status_reason() ==
        "preflight: failed its pre-flight checks as a hot spare: shm: /dev/shm has 0.06 GiB free");
  CHECK_FALSE(n1.spare());
  f.Second({"n1", "n2", "n3"});
  CHECK(f.Node("n2").spare());
  CHECK(f.Warms("n2").size() == 1);
}

TEST_CASE("a node cannot make itself a spare: that is the scheduler's word, kept over a restart") {
  Fixture plain;  // no spares kept
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name("liar");
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_count(8);
  reg.mutable_node()->set_spare(true);
  reg.mutable_node()->set_spare_status("ready: trust me");
  REQUIRE(plain.core->sessions->RegisterWorker(reg).ok());
  CHECK_FALSE(plain.stores.nodes->GetNode("liar")->spare());
  CHECK(plain.stores.nodes->GetNode("liar")->spare_status().empty());

  SpareFixture f;
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.Node("n1").spare());
  const std::string status = f.Node("n1").spare_status();
  reg.mutable_node()->set_name("n1");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_spare(false);
  REQUIRE(f.core->sessions->RegisterWorker(reg).ok());
  CHECK(f.Node("n1").spare());
  CHECK(f.Node("n1").spare_status() == status);
}

TEST_CASE("an ordinary run never starts on a spare, even when it must wait") {
  SpareFixture f;
  const v1::Run first = f.TwoNodesBesideTheSpare();
  const v1::Run second = f.Submit(8, /*retry=*/false);
  for (int i = 0; i < 3; ++i) f.Second({"n1", "n2", "n3"});
  CHECK(f.Get(second).status() == v1::RUN_STATUS_QUEUED);
  CHECK(f.Node("n1").spare());
  // The queue says why, as the cycle decides it: not "placed in the next cycle".
  v1::GetQueueResponse queue;
  REQUIRE(f.core->node_api->GetQueue({"alice", v1::ROLE_USER}, {}, &queue).ok());
  REQUIRE(queue.entries_size() == 1);
  INFO(queue.entries(0).waiting_reason());
  CHECK(
      absl::StrContains(queue.entries(0).waiting_reason(),
                        "1 node (8 GPUs) kept as hot spares for runs resuming after a node fault"));
}

TEST_CASE("a run that lost a node resumes at once on the spare and the node it kept") {
  SpareFixture f;
  const v1::Run run = f.TwoNodesBesideTheSpare("registry.example/team/train:1");

  // n3 goes silent: lost at the lease (3 s), the run requeued after a node failure.
  for (int i = 0; i < 3; ++i) f.Second({"n1", "n2"});
  REQUIRE(f.Node("n3").liveness() == v1::NODE_LIVENESS_LOST);
  const size_t before = f.sent.size();
  // Until n2 says its ranks of the first attempt have gone, nothing is placed there.
  CHECK(f.Get(run).status() == v1::RUN_STATUS_QUEUED);
  v1::Heartbeat drained;
  auto* local = drained.add_attempts();
  local->set_run_id(run.id());
  local->set_resumption_index(0);
  REQUIRE(f.core->sessions->Heartbeat("n2", drained).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  const v1::Run resumed = f.Get(run);
  REQUIRE(resumed.status() == v1::RUN_STATUS_STARTING);
  CHECK(resumed.resumption_index() == 1);
  CHECK(resumed.requeued_after() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  REQUIRE(resumed.requeued_from_nodes_size() == 1);  // the lost node's left out
  CHECK(resumed.requeued_from_nodes(0) == "n2");
  std::set<std::string> on;
  for (const auto& n : resumed.nodes()) on.insert(n.node_name());
  CHECK(on == std::set<std::string>{"n1", "n2"});
  auto attempts = f.stores.runs->ListAttempts(run.id());
  REQUIRE(attempts.ok());
  bool named = false;
  for (const auto& a : *attempts) {
    if (a.resumption_index() == 1) named = a.spare_nodes_size() == 1 && a.spare_nodes(0) == "n1";
  }
  CHECK(named);
  auto events = f.stores.runs->ListEvents(run.id(), 0, 100);
  REQUIRE(events.ok());
  bool said = false;
  for (const auto& e : *events) {
    said = said || absl::StrContains(e.message(), "(n1 a hot spare of its pool");
  }
  CHECK(said);
  size_t starts = 0;
  for (size_t i = before; i < f.sent.size(); ++i) starts += f.sent[i].second.has_start_attempt();
  CHECK(starts == 2);
  // The spare now runs the resumption: no node is left idle to be one.
  f.Second({"n1", "n2"});
  CHECK_FALSE(f.Node("n1").spare());
  CHECK_FALSE(f.Node("n2").spare());
}

TEST_CASE("preemptible work borrows a spare's idle GPUs and leaves them to a resumption") {
  SpareFixture f;
  const v1::Run big = f.TwoNodesBesideTheSpare();

  // Ordinary work waits; preemptible work, of a higher priority than the resumption to come,
  // runs on the spare, which stays one.
  const v1::Run waiting = f.Submit(8, /*retry=*/false);
  const v1::Run borrower = f.SubmitBorrower();
  f.Second({"n1", "n2", "n3"});
  f.Second({"n1", "n2", "n3"});
  CHECK(f.Get(waiting).status() == v1::RUN_STATUS_QUEUED);
  REQUIRE(f.Get(borrower).status() == v1::RUN_STATUS_STARTING);
  REQUIRE(f.Get(borrower).nodes_size() == 1);
  CHECK(f.Get(borrower).nodes(0).node_name() == "n1");
  CHECK(f.Node("n1").spare());
  auto attempts = f.stores.runs->ListAttempts(borrower.id());
  REQUIRE(attempts.ok());
  REQUIRE(attempts->size() == 1);
  CHECK((*attempts)[0].spare_nodes_size() == 0);  // ordinary work, not a resumption
  // Its GPUs are in use, not spare.
  std::vector<v1::Run> runs = {f.Get(big), f.Get(borrower), f.Get(waiting)};
  std::vector<v1::Node> nodes = {f.Node("n1"), f.Node("n2"), f.Node("n3")};
  const auto util = Utilization(runs, nodes, f.clock->Now(), "");
  REQUIRE(util.clusters_size() == 1);
  CHECK(util.clusters(0).nodes_spare() == 1);
  CHECK(util.clusters(0).gpus_spare() == 0);
  CHECK(util.clusters(0).gpus_in_use() == 24);
  CHECK(util.clusters(0).gpus_free() == 0);

  // n3 goes silent and n2's ranks go: the resumption stops the borrower and waits for the spare.
  const v1::Heartbeat borrowing = f.Beat(borrower, /*running=*/true);
  const auto beat_all = [&](bool n2_drained) {
    f.clock->Advance(absl::Seconds(1));
    REQUIRE(f.core->sessions->Heartbeat("n1", borrowing).ok());
    v1::Heartbeat n2;
    if (n2_drained) {
      auto* local = n2.add_attempts();
      local->set_run_id(big.id());
      local->set_resumption_index(0);
    }
    REQUIRE(f.core->sessions->Heartbeat("n2", n2).ok());
    REQUIRE(f.core->cycle->RunCycle().ok());
  };
  for (int i = 0; i < 3; ++i) beat_all(false);
  REQUIRE(f.Node("n3").liveness() == v1::NODE_LIVENESS_LOST);
  const size_t before = f.sent.size();
  beat_all(true);
  bool stopped = false;
  for (size_t i = before; i < f.sent.size(); ++i) {
    const auto& [to, m] = f.sent[i];
    stopped = stopped ||
              (to == "n1" && m.has_stop_attempt() && m.stop_attempt().run_id() == borrower.id());
  }
  CHECK(stopped);
  beat_all(true);
  CHECK(f.Get(big).status() == v1::RUN_STATUS_QUEUED);  // the borrower has not left yet

  // The borrower's rank exits: the resumption starts on the spare and the node it kept, and
  // the borrower waits in the queue, told why.
  f.clock->Advance(absl::Seconds(1));
  REQUIRE(f.core->sessions->Heartbeat("n1", f.Beat(borrower, /*running=*/false, 143)).ok());
  REQUIRE(f.core->sessions->Heartbeat("n2", v1::Heartbeat()).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  const v1::Run resumed = f.Get(big);
  REQUIRE(resumed.status() == v1::RUN_STATUS_STARTING);
  CHECK(resumed.resumption_index() == 1);
  std::set<std::string> on;
  for (const auto& n : resumed.nodes()) on.insert(n.node_name());
  CHECK(on == std::set<std::string>{"n1", "n2"});
  CHECK(f.Get(borrower).status() == v1::RUN_STATUS_QUEUED);
  auto events = f.stores.runs->ListEvents(borrower.id(), 0, 100);
  REQUIRE(events.ok());
  bool told = false;
  for (const auto& e : *events) {
    told = told || absl::StrContains(e.message(), "to free a hot spare for a run resuming");
  }
  CHECK(told);
  CHECK(f.Get(waiting).status() == v1::RUN_STATUS_QUEUED);
}

TEST_CASE("a spare is not lent while a resumption waits for it") {
  SpareFixture f;
  const v1::Run big = f.TwoNodesBesideTheSpare();
  // n3 goes silent; big's attempt is stopped, and its ranks on n2 take a while to go.
  for (int i = 0; i < 3; ++i) f.Second({"n1", "n2"});
  REQUIRE(f.Node("n3").liveness() == v1::NODE_LIVENESS_LOST);
  f.Second({"n1", "n2"});
  REQUIRE(f.Get(big).status() == v1::RUN_STATUS_QUEUED);
  const v1::Run borrower = f.SubmitBorrower();
  f.Second({"n1", "n2"});
  f.Second({"n1", "n2"});
  CHECK(f.Get(borrower).status() == v1::RUN_STATUS_QUEUED);
  CHECK(f.Get(big).status() == v1::RUN_STATUS_QUEUED);

  // n2 is cleared: the resumption takes the spare, which was kept free for it.
  f.clock->Advance(absl::Seconds(1));
  v1::Heartbeat cleared;
  auto* gone = cleared.add_attempts();
  gone->set_run_id(big.id());
  gone->set_resumption_index(0);
  REQUIRE(f.core->sessions->Heartbeat("n2", cleared).ok());
  REQUIRE(f.core->sessions->Heartbeat("n1", v1::Heartbeat()).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  const v1::Run resumed = f.Get(big);
  REQUIRE(resumed.status() == v1::RUN_STATUS_STARTING);
  std::set<std::string> on;
  for (const auto& n : resumed.nodes()) on.insert(n.node_name());
  CHECK(on == std::set<std::string>{"n1", "n2"});
  CHECK(f.Get(borrower).status() == v1::RUN_STATUS_QUEUED);
}

}  // namespace spare_nodes_test
}  // namespace tessera::scheduler
