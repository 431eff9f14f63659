// Rendezvous ports: no two attempts whose rank 0 listens on the same node share a MASTER_PORT,
// also across a scheduler's restart (the port is recorded with the run).
#include "scheduler/service/rendezvous_ports.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/scheduler_service/scheduler_fixture.h"

namespace tessera::scheduler {
namespace rendezvous_ports_test {

v1::Run RunOn(const std::string& head, int port) {
  v1::Run run;
  auto* worker = run.add_nodes();
  worker->set_node_name("other");
  worker->set_node_rank(1);
  auto* first = run.add_nodes();
  first->set_node_name(head);
  first->set_node_rank(0);
  run.set_master_port(port);
  return run;
}

TEST_CASE("rendezvous ports: each attempt on a head node gets a port no other holds there") {
  RendezvousPorts ports(40000, 3);
  ports.Taken(RunOn("a", 40001));
  std::set<int> chosen = {40001};
  for (int i = 0; i < 2; ++i) {
    const int port = ports.Choose("a", "run-" + std::to_string(i), 0);
    CHECK(port >= 40000);
    CHECK(port <= 40002);
    CHECK(chosen.insert(port).second);
  }
  CHECK(chosen.size() == 3);
  // The head is the node of rank 0, not the first listed: "other" holds nothing.
  RendezvousPorts others(40000, 1);
  others.Taken(RunOn("a", 40000));
  CHECK(others.Choose("other", "x", 0) == 40000);
  // Another node may use the same port.
  CHECK(others.Choose("b", "x", 0) == 40000);
}

TEST_CASE("rendezvous ports: a range used up on a node still answers a port of the range") {
  RendezvousPorts ports(40000, 2);
  ports.Taken(RunOn("a", 40000));
  ports.Taken(RunOn("a", 40001));
  const int port = ports.Choose("a", "late", 3);
  CHECK(port >= 40000);
  CHECK(port <= 40001);
}

TEST_CASE("rendezvous ports: runs without a head node or a port hold nothing") {
  RendezvousPorts ports(40000, 1);
  ports.Taken(v1::Run());                // queued: no nodes
  ports.Taken(RunOn("a", 0));            // placed before ports were recorded
  v1::Run narrowed = RunOn("a", 40000);  // draining, its head already confirmed gone
  narrowed.mutable_nodes()->RemoveLast();
  ports.Taken(narrowed);
  CHECK(ports.Choose("a", "x", 0) == 40000);
}

// Eight one-GPU runs on one eight-GPU node, with eight ports to draw from: the hash alone puts
// two of them on one port nearly always (8!/8^8 of the time it does not).
TEST_CASE("runs sharing a head node get distinct MASTER_PORTs, also after a scheduler restart") {
  Fixture f;
  f.config.master_port_base = 41000;
  f.config.master_port_span = 8;
  f.core = f.NewCore();
  f.Register("n1");
  std::vector<v1::Run> runs;
  auto place = [&f](const v1::Run& run) {
    f.sent.clear();
    REQUIRE(f.core->cycle->RunCycle().ok());
    REQUIRE(f.core->cycle->RunCycle().ok());
    REQUIRE(f.Get(run).status() == v1::RUN_STATUS_STARTING);
    REQUIRE(f.sent.size() == 1);
    return f.sent[0].second.start_attempt().master_port();
  };
  std::map<int, v1::Run> by_port;
  for (int i = 0; i < 7; ++i) {
    v1::Run run = f.Submit(1, false);
    const int port = place(run);
    CHECK(port >= 41000);
    CHECK(port < 41008);
    CHECK(f.Get(run).master_port() == port);  // recorded with the run
    CHECK(by_port.emplace(port, run).second);
  }
  // A new scheduler instance knows the ports only from the runs.
  f.core = f.NewCore();
  f.Register("n1");
  v1::Run eighth = f.Submit(1, false);
  const int last_free = place(eighth);
  CHECK(by_port.emplace(last_free, eighth).second);
  REQUIRE(by_port.size() == 8);

  // A run that ends frees its port for the next.
  const auto& [freed, ended] = *by_port.begin();
  v1::AttemptUpdate done;
  done.set_run_id(ended.id());
  done.set_phase(v1::ATTEMPT_PHASE_FINISHED);
  REQUIRE(f.core->sessions->OnAttemptUpdate("n1", done).ok());
  v1::Run next = f.Submit(1, false);
  CHECK(place(next) == freed);
}

}  // namespace rendezvous_ports_test
}  // namespace tessera::scheduler
