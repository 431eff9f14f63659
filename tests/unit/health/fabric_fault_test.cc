// Which switch or rack a sweep's all-reduce pairs name at fault (fabric_fault.h), on results built
// here: the pairs of the ring the sweep forms, each member's result as a worker reports it.
#include "healthcheck/fabric_fault.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "healthcheck/sweep_plan.h"

namespace tessera::health {
namespace fabric_fault_test {

struct Fabric {
  std::map<std::string, v1::Node> known;
  std::vector<std::string> order;  // the sweep's ring order (NeighbourOrder)

  // "a:sw-1/r1" and the like: a node behind a switch and (optionally) a rack.
  explicit Fabric(const std::vector<std::string>& specs) {
    std::vector<v1::Node> nodes;
    for (const auto& spec : specs) {
      v1::Node n;
      const auto colon = spec.find(':');
      n.set_name(spec.substr(0, colon));
      if (colon != std::string::npos) {
        const std::string where = spec.substr(colon + 1);
        const auto slash = where.find('/');
        (*n.mutable_labels())["switch"] = where.substr(0, slash);
        if (slash != std::string::npos) (*n.mutable_labels())["rack"] = where.substr(slash + 1);
      }
      known[n.name()] = n;
      nodes.push_back(n);
    }
    for (const auto& n : NeighbourOrder(nodes)) order.push_back(n.name());
  }

  // Each ring pair's results: members in `down` report ERROR, their partners a TIMEOUT; pairs
  // touching `slow` pass at `slow_busbw` GB/s, the rest at 5.
  std::vector<NamedFabricFault> Find(const std::set<std::string>& down,
                                     const std::set<std::string>& slow = {},
                                     const std::set<std::string>& condemned_before = {},
                                     double slow_busbw = 0.5) const {
    const auto groups = RingPairs(order);
    std::vector<v1::HealthCheckResult> results;
    for (const auto& g : groups) {
      bool any_down = false, any_slow = false;
      for (const auto& m : g) {
        any_down = any_down || down.count(m) > 0;
        any_slow = any_slow || slow.count(m) > 0;
      }
      for (const auto& m : g) {
        v1::HealthCheckResult r;
        r.set_node_name(m);
        r.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
        for (const auto& x : g) r.add_group(x);
        if (down.count(m)) {
          r.set_verdict(v1::HEALTH_VERDICT_ERROR);
          r.set_error("no peer reachable");
        } else if (any_down) {
          r.set_verdict(v1::HEALTH_VERDICT_TIMEOUT);
          r.set_error("the partner never came");
        } else {
          r.set_verdict(v1::HEALTH_VERDICT_PASSED);
          auto* s = r.add_samples();
          s->set_payload_bytes(64 << 20);
          s->set_busbw_gbps(any_slow ? slow_busbw : 5.0);
        }
        results.push_back(r);
      }
    }
    return FindFabricFaults(order, groups, JudgeGroups(groups, results, AnomalyConfig{}), known,
                            condemned_before);
  }
};

std::vector<std::string> NodesOf(const NamedFabricFault& f) {
  return {f.fault.nodes().begin(), f.fault.nodes().end()};
}

TEST_CASE("a switch whose every pair failed is named, with its nodes and the bad pairs") {
  const Fabric fabric({"a:sw-1", "b:sw-1", "c:sw-2", "d:sw-2"});
  const auto faults = fabric.Find({"c", "d"});
  REQUIRE(faults.size() == 1);
  const v1::FabricFault& f = faults[0].fault;
  CHECK(f.label() == "switch");
  CHECK(f.value() == "sw-2");
  CHECK(NodesOf(faults[0]) == std::vector<std::string>{"c", "d"});
  CHECK(f.verdict() == v1::HEALTH_VERDICT_TIMEOUT);  // b+c: b's timeout comes first
  // b+c, c+d and d+a reach it; a+b passed.
  REQUIRE(f.pairs_size() == 3);
  CHECK(absl::StartsWith(f.pairs(0), "b+c: b reported HEALTH_VERDICT_TIMEOUT"));
  CHECK(absl::StartsWith(f.pairs(1), "c+d: c reported HEALTH_VERDICT_ERROR"));
  CHECK(f.finding() ==
        "switch sw-2 (c, d): all 3 all-reduce pairs that reach it failed; the 1 pair elsewhere "
        "passed");
  CHECK(faults[0].evidence.at("fabric_nodes") == 2);
  CHECK(faults[0].evidence.at("fabric_pairs_bad") == 3);
  CHECK(faults[0].evidence.at("fabric_pairs_passed_elsewhere") == 1);
}

TEST_CASE("a rack is named when the rest of its switch passed, a switch when all of it failed") {
  const Fabric fabric({"a:sw-1/r1", "b:sw-1/r1", "c:sw-1/r2", "d:sw-1/r2", "e:sw-2", "f:sw-2"});
  auto faults = fabric.Find({"a", "b"});
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].fault.label() == "rack");
  CHECK(faults[0].fault.value() == "r1");
  CHECK(NodesOf(faults[0]) == std::vector<std::string>{"a", "b"});
  // The whole switch: named as the switch, not again as its two racks.
  faults = fabric.Find({"a", "b", "c", "d"});
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].fault.label() == "switch");
  CHECK(faults[0].fault.value() == "sw-1");
  CHECK(NodesOf(faults[0]).size() == 4);
}

TEST_CASE("one node's failure, or a failure everywhere, names no switch") {
  const Fabric fabric({"a:sw-1", "b:sw-1", "c:sw-2", "d:sw-2", "e:sw-3", "f:sw-3"});
  CHECK(fabric.Find({}).empty());
  CHECK(fabric.Find({"c"}).empty());       // d's pair with e passed
  CHECK(fabric.Find({"b", "c"}).empty());  // one of each switch: their partners passed
  // Every pair failed: nothing says where.
  CHECK(fabric.Find({"a", "b", "c", "d", "e", "f"}).empty());
  // Unlabelled nodes name nothing whatever fails.
  const Fabric plain({"a", "b", "c", "d"});
  CHECK(plain.Find({"c", "d"}).empty());
}

TEST_CASE("two switches down at once are each named while a pair elsewhere passed") {
  const Fabric fabric({"a:sw-1", "b:sw-1", "c:sw-2", "d:sw-2", "e:sw-3", "f:sw-3"});
  const auto faults = fabric.Find({"a", "b", "c", "d"});
  // sw-1 and sw-2 sit side by side in the ring; e+f passed.
  REQUIRE(faults.size() == 2);
  CHECK(faults[0].fault.value() == "sw-1");
  CHECK(faults[1].fault.value() == "sw-2");
  CHECK(faults[0].evidence.at("fabric_pairs_passed_elsewhere") == 1);
}

TEST_CASE("a switch whose node an earlier stage condemned is not the fabric's") {
  const Fabric fabric({"a:sw-1", "b:sw-1", "c:sw-2", "d:sw-2"});
  CHECK(fabric.Find({"c", "d"}, {}, {"d"}).empty());
}

TEST_CASE("slow pairs around a switch name it as slow") {
  const Fabric fabric(
      {"a:sw-1", "b:sw-1", "c:sw-1", "d:sw-1", "e:sw-1", "f:sw-1", "g:sw-2", "h:sw-2"});
  const auto faults = fabric.Find({}, {"g", "h"});
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].fault.value() == "sw-2");
  CHECK(faults[0].fault.verdict() == v1::HEALTH_VERDICT_SLOW);
  CHECK(absl::StrContains(faults[0].fault.finding(),
                          "all 3 all-reduce pairs that reach it were "
                          "slow; the 5 pairs elsewhere passed"));
  CHECK(absl::StrContains(faults[0].fault.pairs(0), "busbw 0.5 GB/s"));
  // Pairs at 0.9 of the others are within the noise: nothing named.
  CHECK(fabric.Find({}, {"g", "h"}, {}, 4.5).empty());
}

TEST_CASE("a switch whose nodes still reach each other (an uplink) is not named") {
  // Pairs leaving sw-2 fail, its own pair passes: two pairs are too little to cordon it on.
  const Fabric fabric({"a:sw-1", "b:sw-1", "c:sw-2", "d:sw-2"});
  const auto groups = RingPairs(fabric.order);
  std::vector<GroupJudgement> judged(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const bool leaves = (groups[g][0] == "b" || groups[g][0] == "d");  // b+c, d+a
    if (leaves) judged[g] = {true, true, v1::HEALTH_VERDICT_TIMEOUT, "no all-reduce result"};
  }
  CHECK(FindFabricFaults(fabric.order, groups, judged, fabric.known, {}).empty());
}

TEST_CASE("a node's port is named with it, and a big switch's nodes are counted past 16") {
  Fabric fabric({"a:sw-1", "b:sw-1", "c:sw-2", "d:sw-2"});
  (*fabric.known["c"].mutable_labels())["port"] = "7";
  auto faults = fabric.Find({"c", "d"});
  REQUIRE(faults.size() == 1);
  CHECK(absl::StartsWith(faults[0].fault.finding(), "switch sw-2 (c port 7, d): "));

  std::vector<std::string> specs = {"x1:sw-1", "x2:sw-1"};
  std::set<std::string> down;
  for (int i = 10; i < 30; ++i) {
    specs.push_back("n" + std::to_string(i) + ":sw-9");
    down.insert("n" + std::to_string(i));
  }
  faults = Fabric(specs).Find(down);
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].fault.nodes_size() == 20);
  CHECK(absl::StrContains(faults[0].fault.finding(), "n25, and 4 more): all 21"));
}

}  // namespace fabric_fault_test
}  // namespace tessera::health
