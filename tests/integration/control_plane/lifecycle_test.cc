// End to end through tessera-server over real sockets: placement, completion, node loss,
// cordons, with the worker side of the control stream driven by the test.
#include <signal.h>

#include <thread>

#include "base/timestamps.h"
#include "healthcheck/health_clients.h"
#include "tests/support/control_plane.h"

namespace tessera::testing {
namespace lifecycle_test {

struct Plane {
  std::unique_ptr<PostgresServer> pg;
  ServerProcess server;
  std::string admin_key, user_key;

  // alice may use priority high (the preemption cases).
  explicit Plane(std::vector<std::string> flags = {"--lease-seconds", "1", "--heartbeat-seconds",
                                                   "0.2", "--stop-grace-seconds", "1",
                                                   "--high-priority-users", "alice"}) {
    auto started = PostgresServer::Start();
    REQUIRE(started.ok());
    pg = *std::move(started);
    admin_key = CreateKey(pg->url(), "ops", "admin");
    user_key = CreateKey(pg->url(), "alice", "user");
    server = StartServer("tessera-server", pg->url(), flags);
  }
  std::unique_ptr<FakeWorker> Worker(const std::string& name, const std::string& sw = "s1") {
    auto w = std::make_unique<FakeWorker>(server.endpoint(), NodeKey(pg->url(), name),
                                          SimulatedNode(name, 8, sw));
    REQUIRE(w->Connect().ok());
    return w;
  }
};

TEST_CASE("a run is placed as a gang, started on every node, and completes", "[control-plane]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  auto w2 = p.Worker("node-2");
  Client alice(p.server.endpoint(), p.user_key);
  v1::Run run = alice.Submit("gang", 16);
  auto s1 = w1->WaitForStart(run.id(), 0, absl::Seconds(10));
  auto s2 = w2->WaitForStart(run.id(), 0, absl::Seconds(10));
  REQUIRE(s1.has_value());
  REQUIRE(s2.has_value());
  CHECK(s1->world_size() == 16);
  CHECK(s1->num_nodes() == 2);
  CHECK(s1->local_world_size() == 8);
  CHECK(s1->node_rank() + s2->node_rank() == 1);
  CHECK(s1->first_rank() + s2->first_rank() == 8);
  CHECK(s1->master_port() == s2->master_port());
  CHECK(s1->master_addr() == "127.0.0.1");
  CHECK(s1->gpu_indices_size() == 8);
  CHECK(s1->command() == "python train.py");
  alice.WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);

  w1->Finish(run.id(), 0, 0);
  w2->Finish(run.id(), 0, 0);
  v1::Run done = alice.WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED);
  CHECK(done.nodes_size() == 2);
  std::vector<std::string> messages;
  const v1::RunDescription description = alice.Describe(run.name());
  for (const auto& e : description.events()) messages.push_back(e.message());
  REQUIRE(messages.size() == 5);
  CHECK(messages[0] == "Run created");
  CHECK(messages[1] == "Run queued");
  CHECK(messages[2].rfind("Run placed on node-", 0) == 0);
  CHECK(messages[3] == "Run started");
  CHECK(messages[4] == "Run completed");
}

TEST_CASE("a failing rank fails the run with its exit code and stops the other nodes",
          "[control-plane]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  auto w2 = p.Worker("node-2");
  Client alice(p.server.endpoint(), p.user_key);
  v1::Run run = alice.Submit("crash", 16);
  REQUIRE(w1->WaitForStart(run.id(), 0, absl::Seconds(10)));
  REQUIRE(w2->WaitForStart(run.id(), 0, absl::Seconds(10)));
  w1->Finish(run.id(), 0, 3);
  v1::Run failed = alice.WaitForStatus(run.name(), v1::RUN_STATUS_FAILED);
  CHECK(failed.status_reason() == "exit code 3");
  CHECK(w2->stops().size() == 1);  // the healthy node was told to stop its ranks
  auto d = alice.Describe(run.name());
  REQUIRE(d.attempts_size() == 1);
  CHECK(d.attempts(0).first_failed_node() == "node-1");
  CHECK(d.events(d.events_size() - 1).message().rfind("Run failed with exit code 3", 0) == 0);
}

TEST_CASE("a lost node requeues the run, which completes on the other nodes", "[control-plane]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  auto w2 = p.Worker("node-2");
  auto w3 = p.Worker("node-3");
  Client alice(p.server.endpoint(), p.user_key);
  v1::Run run = alice.Submit("survivor", 16, /*retry=*/true);
  alice.WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  FakeWorker* victim = nullptr;
  std::vector<FakeWorker*> all = {w1.get(), w2.get(), w3.get()};
  for (auto* w : all) {
    if (!w->starts().empty()) victim = w;
  }
  REQUIRE(victim != nullptr);
  const absl::Time cut = absl::Now();
  victim->Disconnect();  // no more heartbeats: the lease (1 s) expires

  // Requeued and placed on the two remaining nodes as attempt 1.
  for (auto* w : all) {
    if (w == victim) continue;
    REQUIRE(w->WaitForStart(run.id(), 1, absl::Seconds(10)));
  }
  const absl::Duration to_replacement = absl::Now() - cut;
  CHECK(to_replacement < absl::Seconds(3));
  for (auto* w : all) {
    if (w != victim) w->Finish(run.id(), 1, 0);
  }
  alice.WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED);
  auto d = alice.Describe(run.name());
  REQUIRE(d.attempts_size() == 2);
  CHECK(d.attempts(0).end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK(d.attempts(0).detection_method() == v1::DETECTION_METHOD_LEASE_EXPIRY);
  CHECK(d.attempts(0).reason() == "node " + victim->name() + " was lost");
  CHECK(d.attempts(1).end_reason() == v1::ATTEMPT_END_REASON_SUCCEEDED);
  REQUIRE(d.interruptions_size() == 1);
  bool requeued = false;
  for (const auto& e : d.events())
    requeued |= e.message() == "Run placed back in the scheduling queue";
  CHECK(requeued);

  Client ops(p.server.endpoint(), p.admin_key);
  v1::GetNodeRequest get;
  get.set_name(victim->name());
  v1::GetNodeResponse node;
  REQUIRE(ops.scheduler->GetNode(ops.Ctx().get(), get, &node).ok());
  CHECK(node.node().liveness() == v1::NODE_LIVENESS_LOST);
}

TEST_CASE("a run moved off a straggler keeps off it until a sweep passes the node",
          "[control-plane]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  auto w2 = p.Worker("node-2");
  Client alice(p.server.endpoint(), p.user_key);
  v1::Run run = alice.Submit("mover", 8, /*retry=*/true);
  const v1::Run running = alice.WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  REQUIRE(running.nodes_size() == 1);
  FakeWorker* slow = running.nodes(0).node_name() == w1->name() ? w1.get() : w2.get();
  FakeWorker* other = slow == w1.get() ? w2.get() : w1.get();
  // The health API moves it off its straggler, with a system key as it does.
  const std::string system_key = CreateKey(p.pg->url(), "tessera-health", "system");
  Client health(p.server.endpoint(), system_key);
  v1::EvictNodeRequest evict;
  evict.set_node_name(slow->name());
  evict.set_reason(v1::ATTEMPT_END_REASON_STRAGGLER);
  evict.set_detection_method(v1::DETECTION_METHOD_STRAGGLER_WATCH);
  evict.set_run_id(run.id());
  evict.set_detail("2.0 x the median step time of the run's other nodes");
  v1::EvictNodeResponse evicted;
  REQUIRE(health.scheduler->EvictNode(health.Ctx().get(), evict, &evicted).ok());
  REQUIRE(other->WaitForStart(run.id(), 1, absl::Seconds(10)));
  CHECK(alice.Get(run.name()).avoid_node() == slow->name());
  // A user may not lift it; the health API's own client, once a sweep passed the node, does.
  v1::ClearNodeAvoidanceRequest req;
  req.add_node_names(slow->name());
  req.set_sweep_id("sw-1");
  *req.mutable_passed_at() = ToProtoTime(absl::Now());
  v1::ClearNodeAvoidanceResponse resp;
  CHECK(alice.runs->ClearNodeAvoidance(alice.Ctx().get(), req, &resp).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  auto runs_api =
      health::MakeGrpcRunsApi(std::make_shared<ChannelRef>(grpc::CreateChannel(
                                  p.server.endpoint(), grpc::InsecureChannelCredentials())),
                              system_key, health::kHealthClientOptions);
  auto cleared = runs_api->ClearNodeAvoidance({slow->name()}, "sw-1", absl::Now());
  REQUIRE(cleared.ok());
  CHECK(*cleared == std::vector<std::string>{run.name()});
  CHECK(alice.Get(run.name()).avoid_node().empty());
  bool told = false;
  const v1::RunDescription described = alice.Describe(run.name());
  for (const auto& e : described.events()) {
    told |= e.type() == v1::RUN_EVENT_TYPE_NODE_CLEARED &&
            e.message() == "node " + slow->name() +
                               " passed health sweep sw-1: the run may be "
                               "placed there again";
  }
  CHECK(told);
  // Its other node lost, the run goes back to the node at once, not after the avoidance's while.
  other->Disconnect();
  CHECK(slow->WaitForStart(run.id(), 2, absl::Seconds(10)));
}

TEST_CASE("a cordoned node receives nothing, cordoning is for admins and is recorded",
          "[control-plane]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  auto w2 = p.Worker("node-2");
  Client alice(p.server.endpoint(), p.user_key);
  Client ops(p.server.endpoint(), p.admin_key);

  v1::CordonNodeRequest cordon;
  cordon.set_node_name("node-1");
  cordon.set_reason("xid 79 seen in dmesg");
  v1::CordonNodeResponse resp;
  CHECK(alice.cordon->CordonNode(alice.Ctx().get(), cordon, &resp).error_code() ==
        grpc::StatusCode::PERMISSION_DENIED);
  REQUIRE(ops.cordon->CordonNode(ops.Ctx().get(), cordon, &resp).ok());

  for (int i = 0; i < 3; ++i) {
    v1::Run run = alice.Submit("small", 8);
    REQUIRE(w2->WaitForStart(run.id(), 0, absl::Seconds(10)));
    w2->Finish(run.id(), 0, 0);
    alice.WaitForStatus(run.name(), v1::RUN_STATUS_COMPLETED);
  }
  CHECK(w1->starts().empty());

  v1::ListNodeEventsRequest list;
  list.mutable_filter()->add_node_names("node-1");
  list.mutable_filter()->add_types(v1::NODE_EVENT_TYPE_CORDONED);
  v1::ListNodeEventsResponse events;
  REQUIRE(ops.cordon->ListNodeEvents(ops.Ctx().get(), list, &events).ok());
  REQUIRE(events.events_size() == 1);
  CHECK(events.events(0).actor().name() == "ops");
  CHECK(events.events(0).reason() == "xid 79 seen in dmesg");

  // A run that needs both nodes waits while one is cordoned, and starts once it is uncordoned.
  v1::Run big = alice.Submit("big", 16);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK(alice.Get(big.name()).status() == v1::RUN_STATUS_QUEUED);
  v1::UncordonNodeRequest un;
  un.set_node_name("node-1");
  v1::UncordonNodeResponse unresp;
  REQUIRE(ops.cordon->UncordonNode(ops.Ctx().get(), un, &unresp).ok());
  REQUIRE(w1->WaitForStart(big.id(), 0, absl::Seconds(10)));
}

TEST_CASE("stop: every node is told to stop and the run ends STOPPED", "[control-plane]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  Client alice(p.server.endpoint(), p.user_key);
  v1::Run run = alice.Submit("long", 8);
  alice.WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);
  v1::StopRunRequest stop;
  stop.set_name(run.name());
  v1::StopRunResponse resp;
  REQUIRE(alice.runs->StopRun(alice.Ctx().get(), stop, &resp).ok());
  CHECK(resp.run().status() == v1::RUN_STATUS_TERMINATING);
  v1::Run stopped = alice.WaitForStatus(run.name(), v1::RUN_STATUS_STOPPED);
  CHECK(stopped.status_reason() == "stopped by alice");
  REQUIRE(w1->stops().size() == 1);
  CHECK(w1->stops()[0].run_id() == run.id());
}

TEST_CASE("a high-priority run preempts a preemptible one, which goes back to the queue",
          "[control-plane]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  Client alice(p.server.endpoint(), p.user_key);
  v1::SubmitRunRequest low;
  low.mutable_spec()->set_name("low");
  low.mutable_spec()->set_command("x");
  low.mutable_spec()->mutable_compute()->set_gpus(8);
  low.mutable_spec()->mutable_scheduling()->set_priority(v1::PRIORITY_LOW);
  low.mutable_spec()->mutable_scheduling()->set_preemptible(true);
  v1::SubmitRunResponse low_resp;
  REQUIRE(alice.runs->SubmitRun(alice.Ctx().get(), low, &low_resp).ok());
  const v1::Run victim = low_resp.run();
  alice.WaitForStatus(victim.name(), v1::RUN_STATUS_RUNNING);

  v1::SubmitRunRequest high = low;
  high.mutable_spec()->set_name("high");
  high.mutable_spec()->mutable_scheduling()->set_priority(v1::PRIORITY_HIGH);
  high.mutable_spec()->mutable_scheduling()->set_preemptible(false);
  v1::SubmitRunResponse high_resp;
  REQUIRE(alice.runs->SubmitRun(alice.Ctx().get(), high, &high_resp).ok());
  // The victim is told to stop (the fake worker ends its ranks), then the high run starts.
  REQUIRE(w1->WaitForStart(high_resp.run().id(), 0, absl::Seconds(10)));
  REQUIRE(w1->stops().size() == 1);
  CHECK(w1->stops()[0].run_id() == victim.id());
  const v1::Run requeued = alice.Get(victim.name());
  CHECK(requeued.status() == v1::RUN_STATUS_QUEUED);
  CHECK(requeued.retries_used() == 0);
  const v1::RunDescription d = alice.Describe(victim.name());
  REQUIRE(d.attempts_size() == 2);
  CHECK(d.attempts(0).end_reason() == v1::ATTEMPT_END_REASON_PREEMPTED);
  bool preempted = false;
  for (const auto& e : d.events()) {
    preempted |= e.message() == "Run was preempted for a higher-priority run";
  }
  CHECK(preempted);
}

TEST_CASE("GPU counts that can never fit are rejected at submit", "[control-plane]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  Client alice(p.server.endpoint(), p.user_key);
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name("odd");
  req.mutable_spec()->set_command("x");
  req.mutable_spec()->mutable_compute()->set_gpus(12);
  v1::SubmitRunResponse resp;
  grpc::Status st = alice.runs->SubmitRun(alice.Ctx().get(), req, &resp);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(st.error_message().rfind("compute.gpus:", 0) == 0);
}

TEST_CASE(
    "a worker that still runs an orphaned attempt is answered `registered` first, then told to "
    "stop it, at every registration",
    "[control-plane]") {
  Plane p;
  auto stub = v1::WorkerControl::NewStub(
      grpc::CreateChannel(p.server.endpoint(), grpc::InsecureChannelCredentials()));
  const std::string node_key = NodeKey(p.pg->url(), "node-1");
  // The worker takes any other first reply for a failed registration and tries again: a stop
  // sent ahead of the reply once kept such a node registering, and lost, forever.
  for (int registration = 1; registration <= 3; ++registration) {
    INFO("registration " << registration);
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + node_key);
    auto stream = stub->Connect(&ctx);
    v1::WorkerMessage reg;
    *reg.mutable_register_()->mutable_node() = SimulatedNode("node-1", 8, "s1");
    reg.mutable_register_()->set_process_id("worker-1");
    auto* orphan = reg.mutable_register_()->add_attempts();
    orphan->set_run_id("run-that-ended-while-the-worker-was-away");
    orphan->set_resumption_index(0);
    orphan->add_running_ranks(0);
    REQUIRE(stream->Write(reg));
    v1::ControlMessage first, second;
    REQUIRE(stream->Read(&first));
    CHECK(first.has_registered());
    CHECK(first.registered().incarnation() == registration);
    REQUIRE(stream->Read(&second));
    REQUIRE(second.has_stop_attempt());
    CHECK(second.stop_attempt().run_id() == "run-that-ended-while-the-worker-was-away");
    ctx.TryCancel();
    stream->Finish();
  }
}

}  // namespace lifecycle_test
}  // namespace tessera::testing
