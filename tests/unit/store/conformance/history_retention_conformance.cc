// The retention of node history: node events and health sweeps older than a cutoff are removed,
// oldest first and in bounded batches; a running sweep, and everything newer, stays.
#include <algorithm>

#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace history_retention_conformance {

std::vector<std::string> Reasons(const std::vector<v1::NodeEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.reason());
  return out;
}

CONFORMANCE_CASE("retention: node events before a time go, oldest first, a batch at a time") {
  Stores s = FreshStores();
  for (int i = 0; i < 5; ++i) {
    REQUIRE(s.node_events
                ->AppendNodeEvent(MakeNodeEvent(i % 2 ? "n1" : "n2", v1::NODE_EVENT_TYPE_CORDONED,
                                                "e" + std::to_string(i), 10 * i))
                .ok());
  }
  // Before T(35): e0..e3 (at 0, 10, 20, 30); two per call.
  auto first = s.node_events->DeleteNodeEventsBefore(T(35), 2);
  REQUIRE(first.ok());
  CHECK(*first == 2);
  auto left = s.node_events->ListNodeEvents({});
  REQUIRE(left.ok());
  CHECK(Reasons(*left) == std::vector<std::string>{"e2", "e3", "e4"});
  auto second = s.node_events->DeleteNodeEventsBefore(T(35), 2);
  REQUIRE(second.ok());
  CHECK(*second == 2);
  auto none = s.node_events->DeleteNodeEventsBefore(T(35), 2);
  REQUIRE(none.ok());
  CHECK(*none == 0);
  left = s.node_events->ListNodeEvents({});
  REQUIRE(left.ok());
  CHECK(Reasons(*left) == std::vector<std::string>{"e4"});
  // New events still get larger ids than every earlier one.
  auto later =
      s.node_events->AppendNodeEvent(MakeNodeEvent("n1", v1::NODE_EVENT_TYPE_UNCORDONED, "e5", 50));
  REQUIRE(later.ok());
  CHECK(later->id() > left->back().id());
}

v1::Sweep MakeSweep(const std::string& id, v1::SweepState state, int64_t second) {
  v1::Sweep sweep;
  sweep.set_id(id);
  sweep.set_state(state);
  sweep.add_node_names("n1");
  *sweep.mutable_created_at() = ToProtoTime(T(second));
  return sweep;
}

CONFORMANCE_CASE("retention: old sweeps that are over go with their results; running ones stay") {
  Stores s = FreshStores();
  REQUIRE(s.health->CreateSweep(MakeSweep("s-old-done", v1::SWEEP_STATE_FINISHED, 0)).ok());
  REQUIRE(s.health->CreateSweep(MakeSweep("s-old-failed", v1::SWEEP_STATE_FAILED, 10)).ok());
  REQUIRE(s.health->CreateSweep(MakeSweep("s-old-running", v1::SWEEP_STATE_RUNNING, 5)).ok());
  REQUIRE(s.health->CreateSweep(MakeSweep("s-new", v1::SWEEP_STATE_FINISHED, 100)).ok());
  for (const char* sweep : {"s-old-done", "s-old-failed", "s-old-running", "s-new"}) {
    v1::HealthCheckResult r;
    r.set_sweep_id(sweep);
    r.set_node_name("n1");
    r.set_verdict(v1::HEALTH_VERDICT_PASSED);
    REQUIRE(s.health->AddResult(r).ok());
  }
  auto first = s.health->DeleteSweepsBefore(T(50), 1);
  REQUIRE(first.ok());
  CHECK(*first == 1);
  CHECK(absl::IsNotFound(s.health->GetSweep("s-old-done").status()));  // the oldest first
  CHECK(s.health->GetSweep("s-old-failed").ok());
  auto rest = s.health->DeleteSweepsBefore(T(50), 10);
  REQUIRE(rest.ok());
  CHECK(*rest == 1);
  auto sweeps = s.health->ListSweeps(0);
  REQUIRE(sweeps.ok());
  std::vector<std::string> ids;
  for (const auto& sweep : *sweeps) ids.push_back(sweep.id());
  CHECK(ids == std::vector<std::string>{"s-new", "s-old-running"});
  auto results = s.health->ListResults({}, "", 0);
  REQUIRE(results.ok());
  std::vector<std::string> of;
  for (const auto& r : *results) of.push_back(r.sweep_id());
  std::sort(of.begin(), of.end());
  CHECK(of == std::vector<std::string>{"s-new", "s-old-running"});
}

}  // namespace history_retention_conformance
}  // namespace tessera::store::conformance
