// A switch named at fault end to end, all real: PostgreSQL, tessera-server, four tessera-worker
// daemons behind two switches (`--label switch=...`), their canaries. The data links of every node
// behind one switch go down (`mcli admin inject-fault --label switch=sw-2 --kind link-down`: their
// all-reduce canaries reach no peer, their control streams stay up); a sweep must name the
// switch, cordon its nodes together with one reason, and leave the others in service; the nodes
// come back together once every one of them has passed.
#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/local_cluster.h"

namespace tessera::testing {
namespace fabric_e2e_test {

// Short canaries on one thread (the nodes share this machine); a partner that never comes is a
// timeout after 10 s; one passing sweep returns a node the health API took out.
const std::vector<std::string> kServerFlags = {
    "--canary-compute-seconds", "0.3", "--canary-compute-threads", "1",
    "--canary-timeout-seconds", "10",  "--canary-sizes",           "1MiB,4MiB",
    "--uncordon-after-passes",  "1"};

nlohmann::json Sweep(LocalCluster& c, const std::string& nodes = "") {
  ShellResult r = c.Mcli(absl::StrCat("health sweep --wait --timeout 300 -o json",
                                      nodes.empty() ? "" : " --nodes " + nodes));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  return nlohmann::json::parse(r.output.substr(r.output.find('{')));
}

// Waits until no sweep runs: a follow-up of the last one (for the nodes it left inconclusive)
// may still be measuring, and a change made meanwhile would be measured by it.
void WaitForSweepsToEnd(LocalCluster& c) {
  const absl::Time deadline = absl::Now() + absl::Seconds(300);  // as Sweep's --timeout
  while (absl::Now() < deadline) {
    ShellResult r = c.Mcli("health sweeps -o json");
    REQUIRE(r.exit_code == 0);
    if (!absl::StrContains(r.output, "SWEEP_STATE_RUNNING")) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  FAIL("a sweep was still running after 300 s");
}

TEST_CASE("a switch whose links fail is named, its nodes cordoned and returned together") {
  LocalCluster c(kServerFlags);
  for (const auto& [node, sw] : std::vector<std::pair<std::string, std::string>>{
           {"node-a", "sw-1"}, {"node-b", "sw-1"}, {"node-c", "sw-2"}, {"node-d", "sw-2"}}) {
    c.StartWorker(node, 2, {"--allow-fault-injection", "--label", "switch=" + sw});
  }
  ShellResult injected = c.Mcli("admin inject-fault --label switch=sw-2 --kind link-down");
  INFO(injected.output);
  REQUIRE(injected.exit_code == 0);
  CHECK(absl::StrContains(injected.output, "Injected link-down into node node-c"));
  CHECK(absl::StrContains(injected.output, "Injected link-down into node node-d"));

  const nlohmann::json failed = Sweep(c);
  INFO(failed.dump(2));
  const auto& sweep = failed.at("sweep");
  REQUIRE(sweep.at("fabric_faults").size() == 1);
  const auto& fault = sweep.at("fabric_faults")[0];
  CHECK(fault.at("label") == "switch");
  CHECK(fault.at("value") == "sw-2");
  CHECK(fault.at("nodes") == nlohmann::json::array({"node-c", "node-d"}));
  CHECK(fault.at("pairs").size() == 3);  // b+c, c+d, d+a; a+b passed
  CHECK(std::set<std::string>(sweep.at("anomalous_nodes").begin(),
                              sweep.at("anomalous_nodes").end()) ==
        std::set<std::string>{"node-c", "node-d"});
  // One reason for both, naming the switch; the other switch's nodes stay in service.
  const v1::Node c_node = c.Node("node-c"), d_node = c.Node("node-d");
  CHECK(c_node.admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(d_node.admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  CHECK(c_node.status_reason() == d_node.status_reason());
  CHECK(absl::StrContains(c_node.status_reason(),
                          "switch sw-2 (node-c, node-d): all 3 all-reduce "
                          "pairs that reach it failed"));
  CHECK(c.Node("node-a").admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
  CHECK(c.Node("node-b").admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
  // The evidence travels with the cordon event.
  ShellResult events = c.Mcli("get events --node node-c -o json");
  INFO(events.output);
  REQUIRE(events.exit_code == 0);
  bool evidence_named = false;
  for (const auto& e : nlohmann::json::parse(events.output.substr(events.output.find('[')))) {
    evidence_named = evidence_named || (e.contains("evidence") &&
                                        e.at("evidence").value("fabric_value", "") == "sw-2");
  }
  CHECK(evidence_named);
  // `mcli health show` names the switch and its bad pairs.
  ShellResult shown = c.Mcli("health show " + sweep.at("id").get<std::string>());
  CHECK(absl::StrContains(shown.output, "Fabric fault, switch sw-2 (node-c, node-d):"));

  // node-c's link is back and it passes a sweep without node-d: it waits for node-d. (Once any
  // follow-up of the first sweep, which found the same fault, is over.)
  WaitForSweepsToEnd(c);
  CHECK(c.Node("node-c").status_reason() == c.Node("node-d").status_reason());
  REQUIRE(c.Mcli("admin inject-fault node-c --kind clear").exit_code == 0);
  const nlohmann::json without_d = Sweep(c, "node-a,node-b,node-c");
  INFO(without_d.dump(2));
  CHECK(without_d.at("sweep").value("anomalous_nodes", nlohmann::json::array()).empty());
  CHECK(c.Node("node-c").admin_state() == v1::NODE_ADMIN_STATE_CORDONED);
  // The switch repaired: both pass, and both return.
  REQUIRE(c.Mcli("admin inject-fault --label switch=sw-2 --kind clear").exit_code == 0);
  const nlohmann::json passed = Sweep(c);
  INFO(passed.dump(2));
  CHECK(passed.at("sweep").value("anomalous_nodes", nlohmann::json::array()).empty());
  CHECK(c.Node("node-c").admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
  CHECK(c.Node("node-d").admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
}

TEST_CASE("a fault by label names no node when none carries it") {
  LocalCluster c(kServerFlags);
  c.StartWorker("node-a", 2, {"--allow-fault-injection", "--label", "switch=sw-1"});
  ShellResult r = c.Mcli("admin inject-fault --label switch=sw-9 --kind link-down");
  CHECK(r.exit_code != 0);
  CHECK(absl::StrContains(r.output, "no node carries the label switch=sw-9"));
  r = c.Mcli("admin inject-fault node-a --label switch=sw-1 --kind link-down");
  CHECK(r.exit_code != 0);
  CHECK(absl::StrContains(r.output, "name one NODE or give --label KEY=VALUE, not both"));
  r = c.Mcli("admin inject-fault --label switch --kind link-down");
  CHECK(absl::StrContains(r.output, "--label: expected KEY=VALUE"));
}

}  // namespace fabric_e2e_test
}  // namespace tessera::testing
