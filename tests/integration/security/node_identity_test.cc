// The security suite, node identity (real tessera-server, real PostgreSQL, real gRPC): a worker's
// key acts only as its node and is not admin; another node's reports and log lines change nothing;
// a node is what its key's terms say, not what it says of itself.

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <thread>

#include "absl/strings/match.h"
#include "tessera/v1/logs.grpc.pb.h"
#include "tessera/v1/worker.grpc.pb.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_worker.h"
#include "tests/support/postgres_server.h"

namespace tessera::testing {
namespace node_identity_test {

std::unique_ptr<grpc::ClientContext> WithKey(const std::string& key) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + key);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return ctx;
}

// A control stream opened with `key` that registers as `node`.
struct RawStream {
  RawStream(const std::string& endpoint, const std::string& key, const std::string& node)
      : stub(v1::WorkerControl::NewStub(
            grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()))),
        ctx(WithKey(key)),
        stream(stub->Connect(ctx.get())) {
    v1::WorkerMessage reg;
    *reg.mutable_register_()->mutable_node() = SimulatedNode(node);
    reg.mutable_register_()->set_process_id("raw-" + node);
    stream->Write(reg);
  }
  std::unique_ptr<v1::WorkerControl::Stub> stub;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControlMessage>> stream;
};

// A node key made by hand (`tessera-server create-api-key --role node`) with `terms` flags.
std::string NodeKeyWithTerms(const std::string& url, const std::string& node,
                             const std::vector<std::string>& terms) {
  auto key = CreateApiKey(url, node, "node", node, terms);
  INFO(key.status().ToString());
  REQUIRE(key.ok());
  return *key;
}

v1::Node NodeSaying(const std::string& name, const std::string& cluster, int gpus = 8) {
  v1::Node node = SimulatedNode(name, gpus);
  node.set_cluster(cluster);
  (*node.mutable_labels())["pool"] = "team-b";  // where another team's runs go
  return node;
}

TEST_CASE("attack: a node whose key says what it is cannot register as anything else",
          "[security]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  ServerProcess server = StartServer("tessera-server", url, {"--require-node-terms"});
  Client ops(server.endpoint(), CreateKey(url, "ops", "admin"));
  const auto node_exists = [&](const std::string& name) {
    v1::GetNodeRequest get;
    get.set_name(name);
    v1::GetNodeResponse got;
    return ops.scheduler->GetNode(ops.Ctx().get(), get, &got).ok();
  };
  // The scheduler's answer to a control stream opened with `key` that registers as `node` says:
  // OK when it registered, else how the stream ended.
  const auto registration = [&](const std::string& key, const v1::Node& node) {
    auto stub = v1::WorkerControl::NewStub(
        grpc::CreateChannel(server.endpoint(), grpc::InsecureChannelCredentials()));
    auto ctx = WithKey(key);
    auto stream = stub->Connect(ctx.get());
    v1::WorkerMessage reg;
    *reg.mutable_register_()->mutable_node() = node;
    reg.mutable_register_()->set_process_id("raw-" + node.name());
    stream->Write(reg);
    v1::ControlMessage m;
    if (stream->Read(&m) && m.has_registered()) {
      ctx->TryCancel();
      (void)stream->Finish();  // CANCELLED: the test's own doing
      return grpc::Status::OK;
    }
    return stream->Finish();
  };

  // A key whose terms pin the node into pool-a's cluster, GPU type and size, with its label.
  const std::string pinned = NodeKeyWithTerms(
      url, "node-p", {"--cluster", "pool-a", "--gpu-type", "sim", "--max-gpus", "8"});
  const grpc::Status moved = registration(pinned, NodeSaying("node-p", "local"));
  CHECK(moved.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(absl::StrContains(moved.error_message(),
                          "held to the terms of its node key, which allow cluster pool-a"));
  CHECK_FALSE(node_exists("node-p"));  // not even its first word was taken
  v1::Node bigger = NodeSaying("node-p", "pool-a", 64);
  CHECK(registration(pinned, bigger).error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK_FALSE(node_exists("node-p"));
  // Within its terms it registers.
  CHECK(registration(pinned, NodeSaying("node-p", "pool-a")).ok());
  CHECK(node_exists("node-p"));

  // A key that leaves the pool to the node's word is refused by a scheduler that requires terms,
  // naming the flag and the way out.
  const std::string open_key = NodeKey(url, "node-o");
  const grpc::Status open = registration(open_key, NodeSaying("node-o", "pool-a"));
  CHECK(open.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(absl::StrContains(open.error_message(), "--require-node-terms"));
  CHECK(absl::StrContains(open.error_message(), "--cluster and --gpu-type"));
  CHECK_FALSE(node_exists("node-o"));

  // An admin's node key over the API carries terms the same way; a user key cannot have any.
  v1::CreateApiKeyRequest create;
  create.set_user("node-q");
  create.set_role(v1::ROLE_NODE);
  create.set_node("node-q");
  create.mutable_node_terms()->set_cluster("pool-a");
  create.mutable_node_terms()->set_gpu_type("sim");
  (*create.mutable_node_terms()->mutable_labels())["pool"] = "team-a";
  v1::CreateApiKeyResponse created;
  REQUIRE(ops.admin->CreateApiKey(ops.Ctx().get(), create, &created).ok());
  CHECK(created.key().node_terms().cluster() == "pool-a");
  CHECK(registration(created.secret(), NodeSaying("node-q", "pool-a")).ok());
  v1::GetNodeRequest get;
  get.set_name("node-q");
  v1::GetNodeResponse got;
  REQUIRE(ops.scheduler->GetNode(ops.Ctx().get(), get, &got).ok());
  CHECK(got.node().labels().at("pool") == "team-a");  // the key's word, not the node's
  v1::CreateApiKeyRequest user_with_terms;
  user_with_terms.set_user("mallory");
  user_with_terms.mutable_node_terms()->set_cluster("pool-a");
  const grpc::Status refused = ops.admin->CreateApiKey(ops.Ctx().get(), user_with_terms, &created);
  CHECK(refused.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(absl::StrContains(refused.error_message(), "node_terms: only a node key"));
}

TEST_CASE("a node key acts only as its node, for its attempts, and is not admin", "[security]") {
  auto pg = PostgresServer::Start();
  REQUIRE(pg.ok());
  const std::string url = (*pg)->url();
  ServerProcess server =
      StartServer("tessera-server", url, {"--lease-seconds", "60", "--heartbeat-seconds", "0.2"});
  const std::string key1 = NodeKey(url, "node-1"), key2 = NodeKey(url, "node-2");
  FakeWorker w1(server.endpoint(), key1, SimulatedNode("node-1"));
  REQUIRE(w1.Connect().ok());

  SECTION("registering as another node is refused, and that node keeps its stream") {
    RawStream impostor(server.endpoint(), key2, "node-1");
    v1::ControlMessage m;
    CHECK_FALSE(impostor.stream->Read(&m));
    const grpc::Status st = impostor.stream->Finish();
    CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(absl::StrContains(st.error_message(), "node-2"));
    // The real node-1 still gets its runs.
    Client alice(server.endpoint(), CreateKey(url, "alice", "user"));
    v1::Run run = alice.Submit("still-mine", 8);
    CHECK(w1.WaitForStart(run.id(), 0, absl::Seconds(10)).has_value());
  }

  SECTION("another node's reports and log lines for an attempt change nothing") {
    Client alice(server.endpoint(), CreateKey(url, "alice", "user"));
    v1::Run run = alice.Submit("victim", 8);
    REQUIRE(w1.WaitForStart(run.id(), 0, absl::Seconds(10)).has_value());
    alice.WaitForStatus(run.name(), v1::RUN_STATUS_RUNNING);

    // node-2, registered as itself, reports the run's rank failed and its progress.
    RawStream node2(server.endpoint(), key2, "node-2");
    v1::ControlMessage registered;
    REQUIRE(node2.stream->Read(&registered));
    REQUIRE(registered.has_registered());
    v1::WorkerMessage update;
    auto* u = update.mutable_attempt_update();
    u->set_run_id(run.id());
    u->set_resumption_index(0);
    u->set_phase(v1::ATTEMPT_PHASE_FINISHED);
    auto* exit = u->add_rank_exits();
    exit->set_rank(0);
    exit->set_node_name("node-2");
    exit->set_exit_code(1);
    REQUIRE(node2.stream->Write(update));
    v1::WorkerMessage progress;
    progress.mutable_progress()->set_run_id(run.id());
    progress.mutable_progress()->mutable_progress()->set_step(999'999);
    REQUIRE(node2.stream->Write(progress));

    // And pushes log lines for it: as itself (not stored) and as node-1 (refused).
    auto logs = v1::LogService::NewStub(
        grpc::CreateChannel(server.endpoint(), grpc::InsecureChannelCredentials()));
    {
      auto ctx = WithKey(key2);
      auto push = logs->PushLogs(ctx.get());
      v1::LogBatch batch;
      batch.set_idempotency_key("forged-1");
      batch.set_node_name("node-2");
      auto* line = batch.add_lines();
      line->set_run_id(run.id());
      line->set_stream(v1::LOG_STREAM_STDOUT);
      line->set_text("forged line");
      REQUIRE(push->Write(batch));
      v1::LogAck ack;
      REQUIRE(push->Read(&ack));  // acknowledged, so a real worker's shipping goes on
      CHECK(ack.idempotency_key() == "forged-1");
      batch.set_idempotency_key("forged-2");
      batch.set_node_name("node-1");
      push->Write(batch);
      CHECK_FALSE(push->Read(&ack));
      push->WritesDone();
      CHECK(push->Finish().error_code() == grpc::StatusCode::PERMISSION_DENIED);
    }
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const v1::Run after = alice.Get(run.name());
    CHECK(after.status() == v1::RUN_STATUS_RUNNING);
    CHECK(after.progress().step() != 999'999);
    {
      v1::GetLogsRequest req;
      req.set_run_name(run.name());
      auto ctx = alice.Ctx();
      auto reader = logs->GetLogs(ctx.get(), req);
      v1::LogLine line;
      int lines = 0;
      while (reader->Read(&line)) ++lines;
      CHECK(reader->Finish().ok());
      CHECK(lines == 0);
    }
  }

  SECTION("a node key cannot make keys, read runs or cordon") {
    auto admin = v1::AdminService::NewStub(
        grpc::CreateChannel(server.endpoint(), grpc::InsecureChannelCredentials()));
    v1::CreateApiKeyRequest create;
    create.set_user("evil");
    create.set_role(v1::ROLE_ADMIN);
    v1::CreateApiKeyResponse created;
    auto ctx = WithKey(key1);
    const grpc::Status st = admin->CreateApiKey(ctx.get(), create, &created);
    CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
    CHECK(created.secret().empty());
    Client node(server.endpoint(), key1);
    v1::ListRunsResponse runs;
    CHECK(node.runs->ListRuns(node.Ctx().get(), v1::ListRunsRequest(), &runs).error_code() ==
          grpc::StatusCode::PERMISSION_DENIED);
    v1::CordonNodeRequest cordon;
    cordon.set_node_name("node-1");
    cordon.set_reason("mine now");
    v1::CordonNodeResponse cordoned;
    CHECK(node.cordon->CordonNode(node.Ctx().get(), cordon, &cordoned).error_code() ==
          grpc::StatusCode::PERMISSION_DENIED);
    v1::WhoAmIResponse me;
    REQUIRE(node.admin->WhoAmI(node.Ctx().get(), v1::WhoAmIRequest(), &me).ok());
    CHECK(me.role() == v1::ROLE_NODE);
    CHECK(me.node() == "node-1");
  }
}

}  // namespace node_identity_test
}  // namespace tessera::testing
