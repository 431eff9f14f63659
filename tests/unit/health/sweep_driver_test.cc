// The sweep driver's turns: sweeps that share a node never measure it at once
// (SweepDriver::AdvanceRunning), through the health API's handler over fakes.
#include <catch2/catch.hpp>
#include <set>

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

}  // namespace sweep_driver_test
}  // namespace tessera::health
