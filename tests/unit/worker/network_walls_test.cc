// The network walls' rules, as the worker gives them to iptables (a recording runner stands in
// for it here; tests/integration/sandbox/network_walls_test.cc runs the real one).
#include "worker/daemon/network_walls.h"

#include <catch2/catch.hpp>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace network_walls_test {

// Records every command; answers `-S OUTPUT` with `listing`, and fails the programs in `broken`.
struct RecordingIptables final : image::ToolRunner {
  std::vector<std::string> commands;
  std::map<std::string, std::string> listing;  // program -> what -S OUTPUT prints
  std::vector<std::string> broken;
  absl::StatusOr<image::ToolResult> Run(const std::vector<std::string>& argv,
                                        absl::Duration) override {
    const std::string line = absl::StrJoin(argv, " ");
    commands.push_back(line);
    for (const auto& b : broken) {
      if (argv[0] == b)
        return image::ToolResult{.exit_code = 4,
                                 .output = "Permission denied (you must be root)\n"};
    }
    if (absl::EndsWith(line, "-w -S OUTPUT")) {
      return image::ToolResult{.exit_code = 0, .output = listing[argv[0]]};
    }
    return image::ToolResult{.exit_code = 0, .output = ""};
  }
  bool Ran(const std::string& line) const {
    return std::find(commands.begin(), commands.end(), line) != commands.end();
  }
};

TEST_CASE("a walled destination is an address, a network or a port, and nothing else", "[walls]") {
  using D = WalledDestination;
  CHECK(*ParseWalledDestination("10.0.0.5:5432") == D{.address = "10.0.0.5", .port = 5432});
  CHECK(*ParseWalledDestination("10.0.0.0/8") == D{.address = "10.0.0.0/8", .port = 0});
  CHECK(*ParseWalledDestination("[fd00::1]:80") == D{.address = "fd00::1", .port = 80});
  CHECK(*ParseWalledDestination("fd00::/8") == D{.address = "fd00::/8", .port = 0});
  CHECK(*ParseWalledDestination(":9100") == D{.address = "", .port = 9100});
  for (const char* bad : {"", "db.internal:5432", "10.0.0.5:0", "10.0.0.5:70000", "10.0.0.0/33",
                          "[fd00::1", "10.0.0.5:", ":"}) {
    auto d = ParseWalledDestination(bad);
    INFO(bad);
    REQUIRE_FALSE(d.ok());
    CHECK(absl::StrContains(d.status().message(), "ADDRESS[/PREFIX][:PORT]"));
  }
}

TEST_CASE("iptables' rule listing splits into words, a quoted comment as one", "[walls]") {
  CHECK(SplitRuleWords(R"(-A OUTPUT -m comment --comment "tessera-walls:/var/a b" -j TSW-1)") ==
        std::vector<std::string>{"-A", "OUTPUT", "-m", "comment", "--comment",
                                 "tessera-walls:/var/a b", "-j", "TSW-1"});
}

TEST_CASE("walls go up for the ranks' uids, after removing those of workers that are gone",
          "[walls]") {
  testing::TempDir live("walls-live");
  const std::string state = "/var/lib/tessera-worker";
  const std::string chain = NetworkWalls::ChainFor(state);
  CHECK(chain.size() <= 28);
  CHECK(chain == NetworkWalls::ChainFor(state));  // stable: a restarted worker finds its own
  CHECK(chain != NetworkWalls::ChainFor(live.path));
  RecordingIptables ipt;
  ipt.listing["/usr/sbin/iptables"] = absl::StrCat(
      "-P OUTPUT ACCEPT\n",
      "-A OUTPUT -m owner --uid-owner 65534 -m comment --comment tessera-walls:/gone/worker -j "
      "TSW-dead\n",
      "-A OUTPUT -m owner --uid-owner 65534 -m comment --comment tessera-walls:", live.path,
      " -j TSW-live\n",
      "-A OUTPUT -m owner --uid-owner 65534 -m comment --comment tessera-walls:", state, " -j ",
      chain, "\n");
  NetworkWalls walls({.state_dir = state,
                      .rank_uids = {"65534", "100000-4294967294"},
                      .walled = MetadataDestinations(),
                      .iptables = "/usr/sbin/iptables",
                      .ip6tables = "/usr/sbin/ip6tables"},
                     ipt);
  REQUIRE(walls.Install({{.address = "", .port = 9400}}).ok());
  INFO(absl::StrJoin(ipt.commands, "\n"));
  const std::string v4 = "/usr/sbin/iptables -w ";
  const std::string v6 = "/usr/sbin/ip6tables -w ";
  // The dead worker's jump and chain, and this worker's own of before; never a live worker's.
  CHECK(ipt.Ran(v4 + "-D OUTPUT -m owner --uid-owner 65534 -m comment --comment "
                     "tessera-walls:/gone/worker -j TSW-dead"));
  CHECK(ipt.Ran(v4 + "-X TSW-dead"));
  CHECK(ipt.Ran(v4 + "-D OUTPUT -m owner --uid-owner 65534 -m comment --comment tessera-walls:" +
                state + " -j " + chain));
  for (const auto& c : ipt.commands) CHECK_FALSE(absl::StrContains(c, "TSW-live"));
  // The rules: each address for its own family, a port for both.
  CHECK(ipt.Ran(v4 + "-N " + chain));
  CHECK(ipt.Ran(v4 + "-A " + chain + " -d 169.254.169.254 -j REJECT"));
  CHECK(ipt.Ran(v6 + "-A " + chain + " -d fd00:ec2::254 -j REJECT"));
  CHECK_FALSE(ipt.Ran(v4 + "-A " + chain + " -d fd00:ec2::254 -j REJECT"));
  CHECK(ipt.Ran(v4 + "-A " + chain + " -p tcp --dport 9400 -j REJECT"));
  CHECK(ipt.Ran(v6 + "-A " + chain + " -p tcp --dport 9400 -j REJECT"));
  for (const std::string uids : {"65534", "100000-4294967294"}) {
    CHECK(ipt.Ran(v4 + "-I OUTPUT 1 -m owner --uid-owner " + uids +
                  " -m comment --comment tessera-walls:" + state + " -j " + chain));
  }
  // A rendezvous port: only its owner's ranks.
  ipt.commands.clear();
  REQUIRE(walls.GuardPort(29500, 100001).ok());
  CHECK(ipt.Ran(v4 + "-I " + chain +
                " 1 -p tcp --dport 29500 -m owner ! --uid-owner 100001 -j REJECT"));
  walls.ReleasePort(29500, 100001);
  CHECK(ipt.Ran(v4 + "-D " + chain +
                " -p tcp --dport 29500 -m owner ! --uid-owner 100001 -j REJECT"));
}

TEST_CASE("walls: IPv4 alone where ip6tables fails, none (said why) where iptables does",
          "[walls]") {
  RecordingIptables ipt;
  ipt.broken = {"/usr/sbin/ip6tables"};
  NetworkWallsOptions options{.state_dir = "/state",
                              .rank_uids = {"65534"},
                              .walled = MetadataDestinations(),
                              .iptables = "/usr/sbin/iptables",
                              .ip6tables = "/usr/sbin/ip6tables"};
  NetworkWalls v4_only(options, ipt);
  REQUIRE(v4_only.Install().ok());
  for (const auto& c : ipt.commands) {
    if (absl::StartsWith(c, "/usr/sbin/ip6tables")) CHECK(absl::EndsWith(c, "-S OUTPUT"));
  }
  ipt.broken = {"/usr/sbin/iptables"};
  NetworkWalls none(options, ipt);
  const absl::Status st = none.Install();
  CHECK(absl::IsFailedPrecondition(st));
  CHECK(absl::StrContains(st.message(), "you must be root"));
  options.rank_uids.clear();
  NetworkWalls no_uids(options, ipt);
  CHECK(absl::StrContains(no_uids.Install().message(), "no uid to wall"));
}

}  // namespace network_walls_test
}  // namespace tessera::worker
