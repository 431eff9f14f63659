// The security suite, abuse and accountability (real tessera-server, workers, mcli, curl): a
// run's own hang signal costs no one else anything; one run's output cannot fill the database;
// what admins and operators do is in the audit log, with where it came from.
#include <catch2/catch.hpp>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/local_cluster.h"

namespace tessera::testing {
namespace audit_quota_test {

TEST_CASE("a run that goes quiet under a tiny hang_timeout gets no node cordoned", "[security]") {
  LocalCluster c({"--min-hang-timeout-seconds", "1", "--canary-compute-seconds", "0.2",
                  "--canary-timeout-seconds", "20"});
  c.StartWorker("node-a", 2);
  const v1::Run bystander = c.Submit("bystander", "sleep 120", 1, 1);
  c.client->WaitForStatus(bystander.name(), v1::RUN_STATUS_RUNNING);
  // Reports progress once, then nothing: after 2 s its rank is "hung". Launched once per node
  // (the default), its one rank reports where a launcher's ranks do, by RANK.
  v1::SubmitRunRequest req;
  auto* spec = req.mutable_spec();
  spec->set_name("goes-quiet");
  spec->set_command(
      "echo '{\"step\":1,\"time\":'$(date +%s)'}' >> "
      "\"$TESSERA_PROGRESS_DIR/rank-$TESSERA_FIRST_RANK.progress\"; sleep 120");
  spec->mutable_compute()->set_gpus(1);
  spec->mutable_compute()->set_cluster("local");
  spec->mutable_scheduling()->set_hang_timeout_seconds(2);
  v1::SubmitRunResponse resp;
  REQUIRE(c.client->runs->SubmitRun(c.client->Ctx().get(), req, &resp).ok());
  const std::string attacker = resp.run().name();
  c.client->WaitForStatus(attacker, v1::RUN_STATUS_RUNNING);

  // Its attempt is ended for the hang, and the node checked by a sweep, which it passes.
  v1::RunDescription described;
  for (int i = 0; i < 300; ++i) {
    described = c.client->Describe(attacker);
    if (described.interruptions_size() > 0 || described.run().status() == v1::RUN_STATUS_FAILED) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(described.DebugString());
  REQUIRE(
      (described.interruptions_size() > 0 || described.run().status() == v1::RUN_STATUS_FAILED));
  ShellResult sweeps;
  for (int i = 0; i < 300; ++i) {
    sweeps = c.Mcli("get sweeps");
    if (absl::StrContains(sweeps.output, "HANG") && absl::StrContains(sweeps.output, "FINISHED")) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  INFO(sweeps.output);
  CHECK(absl::StrContains(sweeps.output, "HANG"));
  CHECK(absl::StrContains(sweeps.output, "FINISHED"));
  // The node stays in service, and the other tenant's run was never touched.
  CHECK(c.Node("node-a").admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE);
  const v1::Run after = c.client->Get(bystander.name());
  CHECK(after.status() == v1::RUN_STATUS_RUNNING);
  CHECK(after.resumption_index() == 0);
}

TEST_CASE("one run's output is held to its quota, with a marker where lines were dropped",
          "[security]") {
  LocalCluster c({"--log-rate-per-run", "0", "--log-quota-per-run", "64KiB"});
  c.StartWorker("node-a", 2);
  // 2 MB of output at once; then a line after it.
  const v1::Run flood =
      c.Submit("flood",
               "yes 'a line of output, printed again and again' | head -c 2000000; "
               "echo last-line",
               1, 1);
  const v1::Run polite = c.Submit("polite", "echo polite-output", 1, 1);
  c.client->WaitForStatus(flood.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  c.client->WaitForStatus(polite.name(), v1::RUN_STATUS_COMPLETED, absl::Seconds(60));
  std::string text;
  for (int i = 0; i < 100 && !absl::StrContains(text, "64KiB"); ++i) {
    text = c.LogText(flood.name(), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  INFO(text.substr(text.size() > 2000 ? text.size() - 2000 : 0));
  CHECK(absl::StrContains(text, "lines dropped: this run's logs reached their quota of 64KiB"));
  CHECK(text.size() < 200'000);
  CHECK_FALSE(absl::StrContains(text, "last-line"));  // once reached, the quota stays reached
  CHECK(absl::StrContains(WaitForOutput(c, polite.name(), "polite-output"), "polite-output"));
}

TEST_CASE("admins' and operators' actions are audited, with where they came from", "[security]") {
  LocalCluster c;
  c.StartWorker("node-a", 1);
  const std::string ops_key = CreateKey(c.database_url, "carol", "operator");
  const std::string user_key = CreateKey(c.database_url, "bob", "user");
  const std::string http = absl::StrCat("http://127.0.0.1:", c.server.http_port);
  // An operator cordons through REST; a user tries to.
  ShellResult r =
      RunShell(absl::StrCat("curl -sS -X POST -H 'Authorization: Bearer ", ops_key,
                            "' -d '{\"reason\":\"cable\"}' ", http, "/api/v1/nodes/node-a/cordon"));
  INFO(r.output);
  REQUIRE(absl::StrContains(r.output, "NODE_ADMIN_STATE_CORDONED"));
  r = RunShell(absl::StrCat("curl -sS -X POST -H 'Authorization: Bearer ", user_key,
                            "' -d '{\"reason\":\"mine now\"}' ", http,
                            "/api/v1/nodes/node-a/uncordon"));
  CHECK(absl::StrContains(r.output, "PERMISSION_DENIED"));
  // And an admin makes a key and a join token with mcli (gRPC).
  ShellResult made = c.Mcli("admin create-api-key --user dave --role user");
  REQUIRE(made.exit_code == 0);
  ShellResult token = c.Mcli("admin create-join-token --node node-z --expires-in 10m");
  INFO(token.output);
  REQUIRE(token.exit_code == 0);
  CHECK(absl::StrContains(token.output, "tjt_"));
  ShellResult tokens = c.Mcli("admin list-join-tokens");
  CHECK(absl::StrContains(tokens.output, "node-z"));
  CHECK(absl::StrContains(tokens.output, "unused"));
  CHECK_FALSE(absl::StrContains(tokens.output, "tjt_"));

  ShellResult audit = c.Mcli("admin audit -o json");
  INFO(audit.output);
  REQUIRE(audit.exit_code == 0);
  CHECK(absl::StrContains(audit.output, "\"actor\": \"carol\""));
  CHECK(absl::StrContains(audit.output, "CordonService/CordonNode"));
  CHECK(absl::StrContains(audit.output, "node_name node-a"));
  CHECK(absl::StrContains(audit.output, "via the REST gateway"));
  CHECK(absl::StrContains(audit.output, "\"actor\": \"bob\""));
  CHECK(absl::StrContains(audit.output, "PERMISSION_DENIED"));
  CHECK(absl::StrContains(audit.output, "AdminService/CreateApiKey"));
  CHECK(absl::StrContains(audit.output, "user dave"));
  CHECK(absl::StrContains(audit.output, "AdminService/CreateJoinToken"));
  CHECK(absl::StrContains(audit.output, "node node-z"));
  CHECK_FALSE(absl::StrContains(audit.output, "tjt_"));
  // The new key's secret is in no record.
  const std::string secret = made.output.substr(made.output.find("tsk_"), 68);
  CHECK_FALSE(absl::StrContains(audit.output, secret));
  // Filters, and admins only.
  ShellResult cordons = c.Mcli("admin audit --action CordonNode");
  CHECK(absl::StrContains(cordons.output, "carol"));
  CHECK_FALSE(absl::StrContains(cordons.output, "dave"));
  ShellResult as_user = RunShell(
      absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=", c.server.endpoint(),
                   " TESSERA_API_KEY=", user_key, " ", BinaryPath("mcli"), " admin audit"));
  CHECK(as_user.exit_code != 0);
  CHECK(absl::StrContains(as_user.output, "admin"));
}

TEST_CASE("an operator's reads of another user's run are audited, reads of one's own are not",
          "[security]") {
  LocalCluster c;
  c.StartWorker("node-a", 2);
  const std::string ops_key = CreateKey(c.database_url, "carol", "operator");
  const std::string bob_key = CreateKey(c.database_url, "bob", "user");
  Client bob(c.server.endpoint(), bob_key);
  Client carol(c.server.endpoint(), ops_key);
  // Runs are named NAME-XXXX (a random suffix, as mcli's).
  const std::string bobs = bob.Submit("bobs-run", 1).name();
  const std::string carols = carol.Submit("carols-run", 1).name();
  // bob reads his own run, carol hers: nothing recorded.
  bob.Describe(bobs);
  carol.Get(carols);
  const auto mcli_as = [&](const std::string& key, const std::string& args) {
    return RunShell(
        absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=", c.server.endpoint(),
                     " TESSERA_API_KEY=", key, " ", BinaryPath("mcli"), " ", args, " 2>&1"));
  };
  mcli_as(bob_key, "logs " + bobs);
  // carol reads bob's: its spec, its description and its logs, each recorded; through REST too.
  CHECK(carol.Get(bobs).user() == "bob");
  carol.Describe(bobs);
  ShellResult logs = mcli_as(ops_key, "logs " + bobs);
  INFO(logs.output);
  ShellResult rest =
      RunShell(absl::StrCat("curl -sS -H 'Authorization: Bearer ", ops_key,
                            "' http://127.0.0.1:", c.server.http_port, "/api/v1/runs/", bobs));
  INFO(rest.output);
  CHECK(absl::StrContains(rest.output, bobs));

  ShellResult audit = c.Mcli("admin audit -o json");
  INFO(audit.output);
  REQUIRE(audit.exit_code == 0);
  const auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = audit.output.find(what); at != std::string::npos;
         at = audit.output.find(what, at + 1)) {
      ++n;
    }
    return n;
  };
  // gRPC, REST, and mcli logs' own look at the run (how it was launched).
  CHECK(count("\"action\": \"RunService/GetRun\"") >= 2);
  CHECK(count("\"action\": \"RunService/DescribeRun\"") == 1);
  CHECK(count("\"action\": \"LogService/StreamLogs\"") == 1);
  CHECK(count("\"target\": \"run_name " + bobs + "\"") == 1);
  CHECK(count("\"target\": \"name " + bobs + "\"") >= 3);
  CHECK(count("via the REST gateway") == 1);
  CHECK_FALSE(absl::StrContains(audit.output, carols));
  CHECK_FALSE(absl::StrContains(audit.output, "\"actor\": \"bob\""));
}

TEST_CASE("attack: a node's or a service's key used through the REST gateway is refused",
          "[security]") {
  LocalCluster c;
  c.StartWorker("node-a", 1);
  const std::string http = absl::StrCat("http://127.0.0.1:", c.server.http_port);
  const auto whoami = [&](const std::string& key) {
    return RunShell(absl::StrCat("curl -sS -w ' %{http_code}' -H 'Authorization: Bearer ", key,
                                 "' ", http, "/api/v1/whoami"))
        .output;
  };
  // The machines' keys work where they are meant to: straight to the services.
  Client service(c.server.endpoint(), c.system_key);
  v1::WhoAmIResponse who;
  REQUIRE(service.admin->WhoAmI(service.Ctx().get(), v1::WhoAmIRequest(), &who).ok());
  for (const std::string& key : {c.system_key, NodeKey(c.database_url, "node-a")}) {
    const std::string answer = whoami(key);
    INFO(answer);
    CHECK(absl::EndsWith(answer, " 403"));
    CHECK(absl::StrContains(answer, "not accepted through the REST gateway"));
  }
  // And a node key cannot read runs, or the system key list them, through it either.
  const std::string someones = c.client->Submit("someones-run", 1).name();
  const std::string runs = RunShell(absl::StrCat("curl -sS -H 'Authorization: Bearer ",
                                                 c.system_key, "' ", http, "/api/v1/runs"))
                               .output;
  INFO(runs);
  CHECK_FALSE(absl::StrContains(runs, someones));
  // A person's key is served.
  CHECK(absl::StrContains(whoami(c.admin_key), " 200"));
}

}  // namespace audit_quota_test
}  // namespace tessera::testing
