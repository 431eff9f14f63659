// How soon a silent node stops costing its runs, and what keeps that safe: a node that missed a
// beat gets no new run; with a loss lease shorter than the workers' fence lease, a silent node is
// lost at the loss lease and its run placed elsewhere at once, while its worker may not bring its
// GPUs back with ranks of then still running before its fence has fired.
#include <catch2/catch.hpp>

#include "tests/unit/scheduler_service/scheduler_fixture.h"

namespace tessera::scheduler {
namespace node_loss_test {

v1::RegisterWorker Registration(const std::string& node, const v1::Run* running) {
  v1::RegisterWorker reg;
  reg.mutable_node()->set_name(node);
  reg.mutable_node()->set_cluster("local");
  reg.mutable_node()->set_gpu_type("sim");
  reg.mutable_node()->set_gpu_count(8);
  if (running != nullptr) {
    auto* a = reg.add_attempts();
    a->set_run_id(running->id());
    a->set_resumption_index(running->resumption_index());
    a->add_running_ranks(0);
  }
  return reg;
}

// A fence lease of 10 s, a loss lease of 3 s, a heartbeat a second.
void UseLossLease(Fixture& f) {
  f.config.lease = absl::Seconds(10);
  f.config.loss_after = absl::Seconds(3);
  f.config.heartbeat_interval = absl::Seconds(1);
  f.core = f.NewCore();
}

TEST_CASE("a node that missed a heartbeat gets no new run until it is heard again") {
  Fixture f;  // heartbeats every 500 ms: suspected after 750 ms of silence
  f.Register("n1");
  f.clock->Advance(absl::Milliseconds(750));
  const v1::Run run = f.Submit(8, /*retry=*/false);
  auto stats = f.core->cycle->RunCycle();  // admitted, and placed nowhere
  REQUIRE(stats.ok());
  CHECK(stats->suspected_nodes == 1);
  CHECK(f.Get(run).status() == v1::RUN_STATUS_QUEUED);
  // Not lost: it is still online, and its next beat clears it.
  CHECK(f.stores.nodes->GetNode("n1")->liveness() == v1::NODE_LIVENESS_ONLINE);
  REQUIRE(f.core->sessions->Heartbeat("n1", {}).ok());
  stats = f.core->cycle->RunCycle();
  REQUIRE(stats.ok());
  CHECK(stats->suspected_nodes == 0);
  const v1::Run placed = f.Get(run);
  CHECK(placed.status() == v1::RUN_STATUS_STARTING);
  REQUIRE(placed.nodes_size() == 1);
  CHECK(placed.nodes(0).node_name() == "n1");
}

TEST_CASE("with a loss lease shorter than the fence, a silent node is lost at the loss lease") {
  Fixture f;
  UseLossLease(f);
  f.Register("n1");
  f.Register("n2");
  const v1::Run run = f.Submit(8, /*retry=*/true);
  REQUIRE(f.core->cycle->RunCycle().ok());  // admit
  REQUIRE(f.core->cycle->RunCycle().ok());  // place
  const v1::Run placed = f.Get(run);
  REQUIRE(placed.status() == v1::RUN_STATUS_STARTING);
  const std::string node = placed.nodes(0).node_name();
  const std::string other = node == "n1" ? "n2" : "n1";

  // The other node beats each second; this one is silent from 0 s.
  f.clock->Advance(absl::Milliseconds(999));
  REQUIRE(f.core->sessions->Heartbeat(other, {}).ok());
  f.clock->Advance(absl::Seconds(1));
  REQUIRE(f.core->sessions->Heartbeat(other, {}).ok());
  f.clock->Advance(absl::Seconds(1));
  REQUIRE(f.core->sessions->Heartbeat(other, {}).ok());
  REQUIRE(f.core->cycle->RunCycle().ok());
  CHECK(f.stores.nodes->GetNode(node)->liveness() == v1::NODE_LIVENESS_ONLINE);
  f.clock->Advance(absl::Milliseconds(1));  // 3 s: the loss lease, 7 s before the fence lease
  auto stats = f.core->cycle->RunCycle();
  REQUIRE(stats.ok());
  CHECK(stats->lost_nodes == 1);
  CHECK(f.stores.nodes->GetNode(node)->liveness() == v1::NODE_LIVENESS_LOST);
  const v1::Run moved = f.Get(run);
  CHECK(moved.resumption_index() == 1);
  CHECK(moved.status() == v1::RUN_STATUS_STARTING);
  REQUIRE(moved.nodes_size() == 1);
  CHECK(moved.nodes(0).node_name() == other);

  // The partition heals at 4 s with the old attempt's ranks still running there (its fence is
  // at 10 s): the worker may not register, so its GPUs are offered to nobody.
  f.clock->Advance(absl::Seconds(1));
  auto refused = f.core->sessions->RegisterWorker(Registration(node, &placed));
  REQUIRE(absl::IsUnavailable(refused.status()));
  CHECK(refused.status().message().find("1 rank(s)") != std::string::npos);
  CHECK(refused.status().message().find("6s") != std::string::npos);
  CHECK(f.stores.nodes->GetNode(node)->liveness() == v1::NODE_LIVENESS_LOST);
  // Once the fence has fired it may, with or without ranks to report.
  f.clock->Advance(absl::Seconds(6));
  CHECK(f.core->sessions->RegisterWorker(Registration(node, &placed)).ok());
  CHECK(f.stores.nodes->GetNode(node)->liveness() == v1::NODE_LIVENESS_ONLINE);
}

TEST_CASE("a worker started afresh after its node was lost registers at once") {
  Fixture f;
  UseLossLease(f);
  f.Register("n1");
  f.clock->Advance(absl::Seconds(3));
  REQUIRE(f.core->cycle->RunCycle().ok());
  REQUIRE(f.stores.nodes->GetNode("n1")->liveness() == v1::NODE_LIVENESS_LOST);
  // It killed what its predecessor left (KillPreviousIncarnation): nothing of then runs.
  CHECK(f.core->sessions->RegisterWorker(Registration("n1", nullptr)).ok());
  CHECK(f.stores.nodes->GetNode("n1")->liveness() == v1::NODE_LIVENESS_ONLINE);
}

TEST_CASE("without a loss lease the fence lease is the loss lease, as before") {
  SchedulerConfig config{.lease = absl::Seconds(10)};
  CHECK(config.LossLease() == absl::Seconds(10));
  config.loss_after = absl::Seconds(3);
  CHECK(config.LossLease() == absl::Seconds(3));
  config.loss_after = absl::Seconds(30);  // never longer than the fence
  CHECK(config.LossLease() == absl::Seconds(10));
  CHECK(config.SuspectAfter() == absl::Milliseconds(1500));
}

}  // namespace node_loss_test
}  // namespace tessera::scheduler
