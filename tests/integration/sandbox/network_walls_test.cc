// The network walls around ranks, for real: a worker with real iptables rules on the ranks'
// uids, two users' runs on it. Bob's rank tries the control plane's database (the real
// PostgreSQL of the test), the worker's /metrics, Alice's rendezvous port and the cloud's
// metadata address: each is refused at once, while an address nobody walled answers, and Alice
// reaches her own rendezvous port. The worker's rules go when it stops.

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "healthcheck/health_config.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/local_cluster.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace network_walls_test {

// Tries each NAME=PORT (or NAME=HOST:PORT) and prints "NAME open" or "NAME refused" (or the
// error), each within 5 s.
std::string ProbeCommand(const std::vector<std::pair<std::string, std::string>>& targets) {
  std::string args;
  for (const auto& [name, target] : targets) absl::StrAppend(&args, " ", name, "=", target);
  return absl::StrCat(
      "python3 -c '\n"
      "import socket, sys\n"
      "for arg in sys.argv[1:]:\n"
      "    name, target = arg.split(\"=\")\n"
      "    host, _, port = target.rpartition(\":\")\n"
      "    s = socket.socket()\n"
      "    s.settimeout(5)\n"
      "    try:\n"
      "        s.connect((host or \"127.0.0.1\", int(port)))\n"
      "        print(name, \"open\")\n"
      "    except ConnectionRefusedError:\n"
      "        print(name, \"refused\")\n"
      "    except Exception as e:\n"
      "        print(name, type(e).__name__)\n"
      "    s.close()\n"
      "print(\"probed\")\n"
      "'",
      args);
}

// A listener nobody walls: what a run may reach (its dataset server, say).
int OpenListener(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(fd, 16) == 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  port = ntohs(addr.sin_port);
  return fd;
}

TEST_CASE(
    "network walls: another user's rank reaches neither the database, the worker, "
    "a rendezvous port nor the metadata address",
    "[sandbox][walls]") {
  LocalCluster c;
  std::smatch m;
  REQUIRE(std::regex_search(c.database_url, m, std::regex(R"(127\.0\.0\.1:(\d+)/)")));
  const std::string db_port = m[1].str();
  // No --rank-user: each user's ranks run as the uid the control plane gave that user.
  c.StartWorker("node-a", 2,
                {"--sandbox", "bwrap", "--rank-user", "", "--metrics-listen", "127.0.0.1:0",
                 "--network-wall", "127.0.0.1:" + db_port});
  OpenToPassThrough(c.worker("node-a").state_dir);
  const std::string worker_log = c.worker("node-a").process->Log();
  REQUIRE(std::regex_search(worker_log, m, std::regex(R"(metrics=(\d+))")));
  const std::string metrics_port = m[1].str();

  const bool iptables_works = RunShell("iptables -w -S OUTPUT >/dev/null 2>&1").exit_code == 0;
  if (!iptables_works) {
    // Where the machine cannot (no CAP_NET_ADMIN), the worker says so, loudly, and the node's
    // label tells the scheduler and operators.
    WARN("iptables does not work here: only the worker's warning is checked");
    CHECK(absl::StrContains(worker_log, "NETWORK WALLS ARE DOWN"));
    CHECK(c.Node("node-a").labels().at("tessera.io/network-walls") == "unenforced");
    return;
  }
  CHECK(c.Node("node-a").labels().at("tessera.io/network-walls") == "on");
  // The comment that marks the worker's rules (NetworkWalls::Mark).
  const std::string mark = "tessera-walls:" + c.worker("node-a").state_dir;
  CHECK(absl::StrContains(RunShell("iptables -w -S OUTPUT").output, mark));

  int open_port = 0;
  const int open_fd = OpenListener(open_port);
  const v1::Run alice = SubmitAs(
      *c.client, "alice-rendezvous", "host",
      "python3 -c 'import os, socket, time\n"
      "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind((\"127.0.0.1\", int(os.environ[\"MASTER_PORT\"]))); s.listen(8)\n"
      "c = socket.create_connection((\"127.0.0.1\", int(os.environ[\"MASTER_PORT\"])), 5)\n"
      "print(\"alice reaches her own port\", os.environ[\"MASTER_PORT\"], flush=True)\n"
      "time.sleep(120)'",
      1);
  const std::string alice_out = WaitForOutput(c, alice.name(), "alice reaches her own port");
  INFO(alice_out);
  REQUIRE(std::regex_search(alice_out, m, std::regex(R"(own port (\d+))")));
  const std::string rendezvous = m[1].str();

  Client bob(c.server.endpoint(), CreateKey(c.database_url, "bob", "user"));
  const v1::Run probe = SubmitAs(bob, "bob-probe", "host",
                                 ProbeCommand({{"database", db_port},
                                               {"metrics", metrics_port},
                                               {"rendezvous", rendezvous},
                                               {"metadata", "169.254.169.254:80"},
                                               {"unwalled", std::to_string(open_port)}}),
                                 1);
  const std::string said = WaitForOutput(c, probe.name(), "probed", absl::Seconds(60));
  INFO(said);
  CHECK(absl::StrContains(said, "database refused"));
  CHECK(absl::StrContains(said, "metrics refused"));
  CHECK(absl::StrContains(said, "rendezvous refused"));
  CHECK(absl::StrContains(said, "metadata refused"));
  CHECK(absl::StrContains(said, "unwalled open"));
  ::close(open_fd);

  // Stopped, the worker takes its rules with it.
  auto stopped = c.worker("node-a").process->Kill(SIGTERM, absl::Seconds(60));
  REQUIRE(stopped.ok());
  CHECK_FALSE(absl::StrContains(RunShell("iptables -w -S").output, mark));
}

TEST_CASE("a run cannot hold the health canaries' rendezvous ports", "[sandbox][walls]") {
  // A rank that binds the port a sweep's all-reduce is about to use fails its node's canaries,
  // and the node is cordoned with every run on it: the health API's ports are ones no rank may
  // bind. The rank tries the range's first and last ports, and any free port as a control.
  LocalCluster c;
  c.StartWorker("node-a", 1, {"--sandbox", "bwrap", "--rank-user", ""});
  OpenToPassThrough(c.worker("node-a").state_dir);
  const health::HealthConfig health;
  const int first = health.port_base, last = health.port_base + health.port_span - 1;
  const v1::Run squat =
      SubmitAs(*c.client, "squat-canary-ports", "host",
               absl::StrCat("python3 -c 'import os, socket, sys\n"
                            "print(\"uid\", os.getuid())\n"
                            "for port in sys.argv[1:]:\n"
                            "    s = socket.socket()\n"
                            "    try:\n"
                            "        s.bind((\"0.0.0.0\", int(port))); s.listen(1)\n"
                            "        print(\"port\", port, \"held\")\n"
                            "    except PermissionError:\n"
                            "        print(\"port\", port, \"refused\")\n"
                            "print(\"tried\")\n"
                            "' ",
                            first, " ", last, " 0"),
               1);
  const std::string said = WaitForOutput(c, squat.name(), "tried", absl::Seconds(60));
  INFO(said);
  CHECK_FALSE(absl::StrContains(said, "uid 0\n"));
  CHECK(absl::StrContains(said, absl::StrCat("port ", first, " refused")));
  CHECK(absl::StrContains(said, absl::StrCat("port ", last, " refused")));
  CHECK(absl::StrContains(said, "port 0 held"));  // the rank may bind, just not those
}

}  // namespace network_walls_test
}  // namespace tessera::testing
