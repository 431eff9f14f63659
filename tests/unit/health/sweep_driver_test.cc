// The sweep driver's turns: sweeps that share a node never measure it at once
// (SweepDriver::AdvanceRunning), and nodes of one machine take a third turn at compute stress
// when the first two were noisy, through the health API's handler over fakes.
#include <catch2/catch.hpp>
#include <set>

#include "base/timestamps.h"
#include "tests/unit/health/handler_fixture.h"

namespace tessera::health {
namespace sweep_driver_test {
using handler_test::Fixture;

TEST_CASE("sweeps that share a node take turns, oldest first, and disjoint ones run together") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d", "e"}) f.scheduler->Add(n);
  const v1::Sweep older = f.Start({"a", "b"});
  f.clock->Advance(absl::Seconds(1));
  const v1::Sweep newer = f.Start({"b", "c"});  // shares b
  f.clock->Advance(absl::Seconds(1));
  const v1::Sweep apart = f.Start({"d", "e"});
  f.health.Tick();
  CHECK(f.Sweep(older.id()).phase() == 1);
  CHECK(f.Sweep(newer.id()).phase() == 0);  // waits: its canaries on b would meet the older's
  CHECK(f.Sweep(apart.id()).phase() == 1);
  std::set<std::string> measured;
  for (const auto& d : f.scheduler->dispatched) {
    CHECK(d.start_canary().sweep_id() != newer.id());
    measured.insert(d.node_name());
  }
  CHECK(measured == std::set<std::string>{"a", "b", "d", "e"});
  // Still waiting while the older has not answered.
  f.clock->Advance(absl::Seconds(1));
  f.health.Tick();
  CHECK(f.Sweep(newer.id()).phase() == 0);
  // Once the older is over, the newer runs, and to its end.
  const v1::Sweep older_done = f.RunToEnd(older.id());
  REQUIRE(older_done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(older_done.anomalous_nodes_size() == 0);
  f.health.Tick();
  CHECK(f.Sweep(newer.id()).phase() >= 1);
  const v1::Sweep newer_done = f.RunToEnd(newer.id());
  CHECK(newer_done.state() == v1::SWEEP_STATE_FINISHED);
  CHECK(newer_done.anomalous_nodes_size() == 0);
  CHECK(f.RunToEnd(apart.id()).state() == v1::SWEEP_STATE_FINISHED);
}

// Drives sweep `id` to its end; each compute stress canary is answered, stamped with the clock,
// at `speed(node)` x the machine's speed of its moment (`moments`, in turn) or as an ERROR for
// a node of `failing`; the clock moves a second per measurement. Returns the nodes measured at
// the first step, in order.
std::vector<std::string> MeasureInTurn(Fixture& f, const std::string& id,
                                       const std::map<std::string, double>& speed,
                                       const std::vector<double>& moments,
                                       const std::set<std::string>& failing = {},
                                       const std::function<void()>& each_tick = {}) {
  std::vector<std::string> order;
  size_t moment = 0;
  for (int i = 0; i < 300 && f.Sweep(id).state() == v1::SWEEP_STATE_RUNNING; ++i) {
    f.health.Tick();
    if (each_tick) each_tick();
    for (const auto& d : f.scheduler->Take(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS)) {
      v1::ReportHealthResultRequest req;
      auto* r = req.mutable_result();
      r->set_sweep_id(d.start_canary().sweep_id());
      r->set_node_name(d.node_name());
      r->set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
      r->set_step(d.start_canary().step());
      *r->mutable_finished_at() = ToProtoTime(f.clock->Now());
      if (failing.count(d.node_name()) > 0) {
        r->set_verdict(v1::HEALTH_VERDICT_ERROR);
        r->set_error("CUDA error: an illegal memory access was encountered");
      } else {
        const auto it = speed.find(d.node_name());
        r->set_verdict(v1::HEALTH_VERDICT_PASSED);
        r->set_compute_tflops((it == speed.end() ? 1.0 : it->second) *
                              moments[moment++ % moments.size()]);
      }
      if (d.start_canary().step() == 0) order.push_back(d.node_name());
      v1::ReportHealthResultResponse resp;
      REQUIRE(f.handler->ReportHealthResult(handler_test::kSystem, req, &resp).ok());
      f.clock->Advance(absl::Seconds(1));
    }
    f.Answer(v1::HEALTH_CHECK_KIND_ALLREDUCE);
    f.clock->Advance(absl::Milliseconds(200));
  }
  return order;
}

TEST_CASE("nodes of one machine take a third turn when the first two were noisy") {
  const std::vector<std::string> nodes = {"a", "b", "c", "d", "e", "f", "g", "h"};
  const auto machine = [&](Fixture& f) {
    for (const auto& n : nodes) f.scheduler->Add(n, "127.0.0.1");
  };
  // Quiet: two turns, the second starting halfway.
  {
    Fixture f;
    machine(f);
    const v1::Sweep s = f.Start();
    const auto order = MeasureInTurn(f, s.id(), {}, {1.0, 1.01, 0.99, 1.0});
    CHECK(f.Sweep(s.id()).state() == v1::SWEEP_STATE_FINISHED);
    CHECK(f.Sweep(s.id()).compute_passes() == 2);
    REQUIRE(order.size() == 16);
    CHECK(order[8] == "e");
    CHECK(f.Sweep(s.id()).anomalous_nodes_size() == 0);
  }
  // The machine swings by 20% from one measurement to the next: a third turn, starting a quarter
  // of the way, before the all-reduce rounds; the sweep then runs to its end as before.
  const std::vector<double> swinging = {1.0, 0.8, 1.2, 0.9, 1.1, 0.85, 1.15, 1.0, 0.8};
  {
    Fixture f;
    machine(f);
    const v1::Sweep s = f.Start();
    const auto order = MeasureInTurn(f, s.id(), {}, swinging);
    const v1::Sweep done = f.Sweep(s.id());
    CHECK(done.state() == v1::SWEEP_STATE_FINISHED);
    CHECK(done.compute_passes() == 3);
    REQUIRE(order.size() == 24);
    CHECK(order[16] == "c");
    CHECK(std::set<std::string>(order.begin() + 16, order.end()) ==
          std::set<std::string>(nodes.begin(), nodes.end()));
    CHECK(done.anomalous_nodes_size() == 0);  // healthy nodes' noise condemns none
  }
  // A node whose checks failed outright in the first two turns is taken out before the third,
  // not after it.
  {
    Fixture f;
    machine(f);
    const v1::Sweep s = f.Start();
    bool cordoned_before_third = false;
    MeasureInTurn(f, s.id(), {}, swinging, {"d"}, [&] {
      const v1::Sweep now = f.Sweep(s.id());
      if (now.compute_passes() == 3 && now.phase() == 17) {
        cordoned_before_third = !f.cordon->cordoned.empty() && f.cordon->cordoned[0].first == "d";
      }
    });
    CHECK(cordoned_before_third);
    CHECK(f.Sweep(s.id()).compute_passes() == 3);
    CHECK(f.cordon->cordoned.size() == 1);  // once, not again after the third turn
  }
}

TEST_CASE(
    "a finished sweep tells the run manager the nodes it passed, for runs that keep off them") {
  Fixture f;
  for (const auto& n : {"a", "b", "c", "d"}) f.scheduler->Add(n);
  const v1::Sweep s = f.Start();
  MeasureInTurn(f, s.id(), {}, {1.0}, {"b"});
  REQUIRE(f.Sweep(s.id()).state() == v1::SWEEP_STATE_FINISHED);
  CHECK(f.Sweep(s.id()).anomalous_nodes(0) == "b");
  REQUIRE(f.runs->cleared.size() == 1);
  CHECK(f.runs->cleared[0].first == std::vector<std::string>{"a", "c", "d"});  // not b
  CHECK(f.runs->cleared[0].second == s.id());
  // The run manager away: the runs keep off the nodes for the avoidance's while; the sweep is
  // done all the same.
  f.runs->clear_status = absl::UnavailableError("the run manager is restarting");
  const v1::Sweep next = f.Start({"a", "c"});
  MeasureInTurn(f, next.id(), {}, {1.0});
  CHECK(f.Sweep(next.id()).state() == v1::SWEEP_STATE_FINISHED);
  CHECK(f.runs->cleared.size() == 2);
}

}  // namespace sweep_driver_test
}  // namespace tessera::health
