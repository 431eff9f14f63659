// The scheduler's node API alone, over a memory node store and a list of runs.
#include "scheduler/service/node_api.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "base/timestamps.h"
#include "services/common/node_labels.h"
#include "services/store/memory/memory_database.h"
#include "tests/unit/scheduler_service/fake_scheduler_clients.h"

namespace tessera::scheduler {
namespace node_api_test {

const auth::Principal kAdmin{"root", v1::ROLE_ADMIN};
const auth::Principal kAlice{"alice", v1::ROLE_USER};

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<ListedRuns> runs = std::make_shared<ListedRuns>();
  NodeApi api{stores.nodes, runs, std::make_shared<IdempotentCalls>(stores.idempotency, clock)};

  v1::Node AddNode(const std::string& name, v1::NodeLiveness liveness, int gpus = 8) {
    v1::Node n;
    n.set_name(name);
    n.set_cluster("local");
    n.set_gpu_type("sim");
    n.set_gpu_count(gpus);
    n.set_liveness(liveness);
    n.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
    n.set_health(v1::NODE_HEALTH_HEALTHY);
    return *stores.nodes->CreateNode(n);
  }
  v1::Run AddRun(const std::string& name, const std::string& user, v1::RunStatus status, int gpus,
                 const std::string& node = "") {
    v1::Run r;
    r.set_id("id-" + name);
    r.set_name(name);
    r.set_user(user);
    r.set_status(status);
    r.mutable_spec()->set_name(name);
    r.mutable_spec()->mutable_compute()->set_gpus(gpus);
    if (!node.empty()) {
      auto* n = r.add_nodes();
      n->set_node_name(node);
      for (int i = 0; i < gpus; ++i) n->add_gpu_indices(i);
    }
    runs->runs.push_back(r);
    return r;
  }
};

TEST_CASE(
    "node api: labels are set and removed by admins only, and a keyed retry is answered again") {
  Fixture f;
  f.AddNode("n1", v1::NODE_LIVENESS_ONLINE);
  v1::SetNodeLabelsRequest req;
  req.set_name("n1");
  req.set_idempotency_key("k1");
  (*req.mutable_labels())["rack"] = "r7";
  v1::SetNodeLabelsResponse resp;
  CHECK(absl::IsPermissionDenied(f.api.SetNodeLabels(kAlice, req, &resp)));
  REQUIRE(f.api.SetNodeLabels(kAdmin, req, &resp).ok());
  CHECK(resp.node().labels().at("rack") == "r7");
  CHECK(resp.node().labels().at(kOperatorLabelKeysLabel) == "rack");  // a person set it
  const int64_t version = f.stores.nodes->GetNode("n1")->version();

  // The same key and request: the recorded answer, and no second write.
  v1::SetNodeLabelsResponse again;
  REQUIRE(f.api.SetNodeLabels(kAdmin, req, &again).ok());
  CHECK(again.node().labels().at("rack") == "r7");
  CHECK(f.stores.nodes->GetNode("n1")->version() == version);
  // The same key with another request is refused.
  (*req.mutable_labels())["rack"] = "r8";
  CHECK(absl::IsInvalidArgument(f.api.SetNodeLabels(kAdmin, req, &again)));

  v1::SetNodeLabelsRequest remove;
  remove.set_name("n1");
  (*remove.mutable_labels())["rack"] = "";
  REQUIRE(f.api.SetNodeLabels(kAdmin, remove, &resp).ok());
  CHECK(resp.node().labels().count("rack") == 0);
  CHECK(resp.node().labels().count(kOperatorLabelKeysLabel) == 0);

  // The record is Tessera's: no one sets it.
  v1::SetNodeLabelsRequest forged;
  forged.set_name("n1");
  (*forged.mutable_labels())[kOperatorLabelKeysLabel] = "";
  const absl::Status refused = f.api.SetNodeLabels(kAdmin, forged, &resp);
  CHECK(absl::IsInvalidArgument(refused));
  CHECK_THAT(std::string(refused.message()), Catch::Contains("is Tessera's own record"));
  // A node's labels are few: the keys people set fit in one label's value, or are refused.
  v1::SetNodeLabelsRequest many;
  many.set_name("n1");
  for (int i = 0; i < 40; ++i) (*many.mutable_labels())["label-number-" + std::to_string(i)] = "v";
  CHECK(absl::IsInvalidArgument(f.api.SetNodeLabels(kAdmin, many, &resp)));
  CHECK(f.stores.nodes->GetNode("n1")->labels().count("label-number-0") == 0);

  v1::SetNodeLabelsRequest bad;
  bad.set_name("n1");
  (*bad.mutable_labels())[std::string(64, 'k')] = "v";
  CHECK(absl::IsInvalidArgument(f.api.SetNodeLabels(kAdmin, bad, &resp)));
  bad.set_name("nobody");
  bad.clear_labels();
  CHECK(absl::IsNotFound(f.api.SetNodeLabels(kAdmin, bad, &resp)));
}

TEST_CASE("node api: an online node cannot be removed, a lost one can") {
  Fixture f;
  f.AddNode("up", v1::NODE_LIVENESS_ONLINE);
  f.AddNode("gone", v1::NODE_LIVENESS_LOST);
  v1::RemoveNodeRequest req;
  v1::RemoveNodeResponse resp;
  req.set_name("up");
  CHECK(absl::IsFailedPrecondition(f.api.RemoveNode(kAdmin, req, &resp)));
  req.set_name("gone");
  CHECK(absl::IsPermissionDenied(f.api.RemoveNode(kAlice, req, &resp)));
  REQUIRE(f.api.RemoveNode(kAdmin, req, &resp).ok());
  CHECK(absl::IsNotFound(f.stores.nodes->GetNode("gone").status()));
  req.set_name("");
  CHECK(absl::IsInvalidArgument(f.api.RemoveNode(kAdmin, req, &resp)));
}

TEST_CASE("node api: a node names only the runs its caller may see") {
  Fixture f;
  f.AddNode("n1", v1::NODE_LIVENESS_ONLINE);
  f.AddRun("mine", "alice", v1::RUN_STATUS_RUNNING, 2, "n1");
  f.AddRun("theirs", "bob", v1::RUN_STATUS_RUNNING, 2, "n1");
  f.AddRun("done", "alice", v1::RUN_STATUS_COMPLETED, 2, "n1");
  v1::GetNodeRequest req;
  req.set_name("n1");
  v1::GetNodeResponse resp;
  REQUIRE(f.api.GetNode(kAlice, req, &resp).ok());
  CHECK(std::vector<std::string>(resp.run_names().begin(), resp.run_names().end()) ==
        std::vector<std::string>{"mine"});
  v1::GetNodeResponse as_admin;
  REQUIRE(f.api.GetNode(kAdmin, req, &as_admin).ok());
  CHECK(as_admin.run_names_size() == 2);
}

TEST_CASE("node api: the queue tells each run's place and reason, hiding others' details") {
  Fixture f;
  f.AddNode("n1", v1::NODE_LIVENESS_ONLINE, 8);
  f.AddRun("fits", "alice", v1::RUN_STATUS_QUEUED, 8);
  f.AddRun("big", "bob", v1::RUN_STATUS_QUEUED, 16);
  v1::GetQueueRequest req;
  v1::GetQueueResponse resp;
  REQUIRE(f.api.GetQueue(kAlice, req, &resp).ok());
  REQUIRE(resp.entries_size() == 2);
  CHECK(resp.entries(0).run().name() == "fits");
  CHECK(resp.entries(0).position() == 0);
  CHECK(resp.entries(0).waiting_reason() == "placed in the next cycle");
  CHECK(resp.entries(1).run().name() == "(another user's run)");
  CHECK(resp.entries(1).run().user().empty());
  CHECK(resp.entries(1).run().id().empty());
  CHECK(resp.entries(1).run().spec().command().empty());
  CHECK(resp.entries(1).run().spec().compute().gpus() == 16);  // what it waits for
  CHECK(resp.entries(1).position() == 1);
  CHECK_FALSE(resp.entries(1).waiting_reason().empty());

  req.set_limit(1);
  v1::GetQueueResponse limited;
  REQUIRE(f.api.GetQueue(kAlice, req, &limited).ok());
  CHECK(limited.entries_size() == 1);
  req.set_limit(-1);
  CHECK(absl::IsInvalidArgument(f.api.GetQueue(kAlice, req, &limited)));
}

TEST_CASE("node api: the queue sees hot spares as the cycle does") {
  Fixture f;
  v1::Node spare = f.AddNode("n1", v1::NODE_LIVENESS_ONLINE, 8);
  spare.set_spare(true);
  REQUIRE(f.stores.nodes->UpdateNode(spare, spare.version(), {}).ok());
  REQUIRE(f.stores.nodes->GetNode("n1")->spare());
  f.AddNode("n2", v1::NODE_LIVENESS_ONLINE, 8);
  f.AddRun("holder", "bob", v1::RUN_STATUS_RUNNING, 8, "n2");
  f.AddRun("plain", "alice", v1::RUN_STATUS_QUEUED, 8);
  f.AddRun("borrower", "alice", v1::RUN_STATUS_QUEUED, 8);
  f.runs->runs.back().mutable_spec()->mutable_scheduling()->set_preemptible(true);
  v1::GetQueueResponse resp;
  REQUIRE(f.api.GetQueue(kAlice, {}, &resp).ok());
  std::map<std::string, std::string> why;
  for (const auto& e : resp.entries()) why[e.run().name()] = e.waiting_reason();
  REQUIRE(why.size() == 2);
  INFO(why["plain"]);
  INFO(why["borrower"]);
  // Not "placed in the next cycle": only resumptions and preemptible work go to a spare.
  CHECK(absl::StrContains(why["plain"],
                          "; 1 node (8 GPUs) kept as hot spares for runs resuming "
                          "after a node fault"));
  CHECK(why["borrower"] ==
        "placed in the next cycle, on a hot spare's idle GPUs (stopped if a run resuming after a "
        "node fault needs them)");

  // While a run resuming after a node fault waits, nothing is lent.
  f.AddRun("resuming", "bob", v1::RUN_STATUS_QUEUED, 16);
  f.runs->runs.back().set_requeued_after(v1::ATTEMPT_END_REASON_NODE_FAILURE);
  v1::GetQueueResponse waits;
  REQUIRE(f.api.GetQueue(kAlice, {}, &waits).ok());
  for (const auto& e : waits.entries()) {
    INFO(e.waiting_reason());
    CHECK_FALSE(absl::StrContains(e.waiting_reason(), "placed in the next cycle"));
  }
}

TEST_CASE(
    "node api: the queue places a requeued run that accepts fewer nodes as the cycle will, and "
    "says when it may") {
  Fixture f;
  f.AddNode("n1", v1::NODE_LIVENESS_ONLINE, 8);
  f.AddNode("n2", v1::NODE_LIVENESS_ONLINE, 8);
  f.AddRun("holder", "bob", v1::RUN_STATUS_RUNNING, 8, "n2");  // n2 is taken
  f.AddRun("big", "alice", v1::RUN_STATUS_QUEUED, 16);
  v1::Run& run = f.runs->runs.back();  // the one the queue reads
  run.mutable_spec()->mutable_compute()->set_nodes(2);
  run.mutable_spec()->mutable_compute()->set_min_nodes(1);
  run.set_resumption_index(1);
  *run.mutable_updated_at() = ToProtoTime(f.clock->Now());
  NodeApi api{
      f.stores.nodes, f.runs,  std::make_shared<IdempotentCalls>(f.stores.idempotency, f.clock),
      nullptr,        f.clock, absl::Seconds(60)};
  v1::GetQueueRequest req;
  v1::GetQueueResponse waiting;
  REQUIRE(api.GetQueue(kAlice, req, &waiting).ok());
  REQUIRE(waiting.entries_size() == 1);
  INFO(waiting.entries(0).waiting_reason());
  CHECK_FALSE(absl::StartsWith(waiting.entries(0).waiting_reason(), "placed"));
  CHECK(absl::EndsWith(waiting.entries(0).waiting_reason(),
                       "; it may start on as few as 1 of its 2 nodes (compute.min_nodes) in 1m"));
  f.clock->Advance(absl::Seconds(60));
  v1::GetQueueResponse shrunk;
  REQUIRE(api.GetQueue(kAlice, req, &shrunk).ok());
  REQUIRE(shrunk.entries_size() == 1);
  CHECK(shrunk.entries(0).waiting_reason() ==
        "placed in the next cycle, on 1 of its 2 nodes (compute.min_nodes is 1)");
}

TEST_CASE("node api: the fit check refuses what no node could ever hold") {
  Fixture f;
  f.AddNode("n1", v1::NODE_LIVENESS_ONLINE, 8);
  v1::CheckFitRequest req;
  v1::CheckFitResponse resp;
  req.mutable_compute()->set_gpus(8);
  CHECK(f.api.CheckFit(kAlice, req, &resp).ok());
  req.mutable_compute()->set_gpus(64);
  CHECK_FALSE(f.api.CheckFit(kAlice, req, &resp).ok());
}

}  // namespace node_api_test
}  // namespace tessera::scheduler
