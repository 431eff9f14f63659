// NodeLiveness on a copy of the nodes that may be older than the store: the cycle expires leases
// on its own copy first (so a dead node is declared at its lease's end) and again on a fresh read.
#include "scheduler/service/node_liveness.h"

#include <catch2/catch.hpp>

#include "services/store/stores.h"

namespace tessera::scheduler {
namespace node_liveness_test {

struct Liveness {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<LeaseTable> leases = std::make_shared<LeaseTable>(clock, absl::Seconds(3));
  NodeLiveness liveness{stores.nodes, leases, clock, SchedulerConfig{.lease = absl::Seconds(3)}};

  // A node registered: stored online, with a fresh lease.
  void Register(const std::string& name) {
    v1::Node n;
    n.set_name(name);
    n.set_cluster("local");
    n.set_gpu_count(8);
    n.set_liveness(v1::NODE_LIVENESS_ONLINE);
    n.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
    REQUIRE(stores.nodes->CreateNode(n).ok());
    leases->Grant(name);
  }
  std::vector<v1::Node> Read() { return *stores.nodes->ListNodes({}); }
};

TEST_CASE("a silent node the cycle's copy lacks is declared lost from the next complete list") {
  Liveness l;
  l.Register("n1");
  std::vector<v1::Node> copy = l.Read();  // read before n2 registered
  l.Register("n2");
  l.clock->Advance(absl::Seconds(3));
  auto lost = l.liveness.ExpireLeases(copy, /*complete=*/false);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].name() == "n1");
  CHECK(copy[0].liveness() == v1::NODE_LIVENESS_LOST);  // the copy learns its own write
  // n2 is not in the copy: not dropped as a removed node's lease, it waits.
  CHECK(l.stores.nodes->GetNode("n2")->liveness() == v1::NODE_LIVENESS_ONLINE);
  REQUIRE(l.leases->Expired().size() == 1);
  std::vector<v1::Node> fresh = l.Read();
  lost = l.liveness.ExpireLeases(fresh, /*complete=*/true);
  REQUIRE(lost.size() == 1);
  CHECK(lost[0].name() == "n2");
  CHECK(l.stores.nodes->GetNode("n2")->liveness() == v1::NODE_LIVENESS_LOST);
  CHECK(l.leases->Expired().empty());
}

TEST_CASE("a removed node's ended lease is dropped from a complete list, not declared lost") {
  Liveness l;
  l.Register("n1");
  REQUIRE(l.stores.nodes->DeleteNode("n1").ok());
  l.clock->Advance(absl::Seconds(3));
  std::vector<v1::Node> fresh = l.Read();
  CHECK(l.liveness.ExpireLeases(fresh, /*complete=*/true).empty());
  CHECK(l.leases->Expired().empty());
  CHECK_FALSE(l.stores.nodes->GetNode("n1").ok());
}

TEST_CASE("a node another writer changed since the copy was read is declared lost next time") {
  Liveness l;
  l.Register("n1");
  std::vector<v1::Node> copy = l.Read();
  auto n1 = l.stores.nodes->GetNode("n1");  // an operator cordons it meanwhile
  n1->set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  REQUIRE(l.stores.nodes->UpdateNode(*n1, n1->version(), {}).ok());
  l.clock->Advance(absl::Seconds(3));
  CHECK(l.liveness.ExpireLeases(copy, /*complete=*/false).empty());  // its write lost the race
  CHECK(l.stores.nodes->GetNode("n1")->liveness() == v1::NODE_LIVENESS_ONLINE);
  std::vector<v1::Node> fresh = l.Read();
  const auto lost = l.liveness.ExpireLeases(fresh, /*complete=*/true);
  REQUIRE(lost.size() == 1);
  const v1::Node stored = *l.stores.nodes->GetNode("n1");
  CHECK(stored.liveness() == v1::NODE_LIVENESS_LOST);
  CHECK(stored.admin_state() == v1::NODE_ADMIN_STATE_CORDONED);  // the operator's change kept
}

}  // namespace node_liveness_test
}  // namespace tessera::scheduler
