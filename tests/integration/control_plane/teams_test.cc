// Teams through real processes: tessera-server on PostgreSQL, workers' control streams driven by
// the test, admins' and users' calls over gRPC and through the mcli binary. Two teams with
// quotas, one borrowing idle GPUs and giving them back, the queue's reasons, utilization and
// usage.
#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tessera/v1/teams.grpc.pb.h"
#include "tests/support/binaries.h"
#include "tests/support/control_plane.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace teams_test {

struct Plane {
  std::unique_ptr<PostgresServer> pg;
  ServerProcess server;
  std::string admin_key, ann_key, bob_key;

  Plane() {
    auto started = PostgresServer::Start();
    REQUIRE(started.ok());
    pg = *std::move(started);
    admin_key = CreateKey(pg->url(), "ops", "admin");
    ann_key = CreateKey(pg->url(), "ann", "user");
    bob_key = CreateKey(pg->url(), "bob", "user");
    server = StartServer(
        "tessera-server", pg->url(),
        {"--lease-seconds", "1", "--heartbeat-seconds", "0.2", "--stop-grace-seconds", "1"});
  }
  std::unique_ptr<FakeWorker> Worker(const std::string& name) {
    auto w = std::make_unique<FakeWorker>(server.endpoint(), NodeKey(pg->url(), name),
                                          SimulatedNode(name, 8));
    REQUIRE(w->Connect().ok());
    return w;
  }
  ShellResult Mcli(const std::string& key, const std::string& args) {
    return RunShell(absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=", server.endpoint(),
                                 " TESSERA_API_KEY=", key, " ", BinaryPath("mcli"), " ", args,
                                 " 2>&1"));
  }
};

v1::SubmitRunRequest RunOf(const std::string& name, int gpus, bool preemptible,
                           v1::Priority priority = v1::PRIORITY_MEDIUM) {
  v1::SubmitRunRequest req;
  req.mutable_spec()->set_name(name);
  req.mutable_spec()->set_command("python train.py");
  req.mutable_spec()->mutable_compute()->set_gpus(gpus);
  req.mutable_spec()->mutable_scheduling()->set_preemptible(preemptible);
  req.mutable_spec()->mutable_scheduling()->set_priority(priority);
  return req;
}

TEST_CASE("two teams: quotas, borrowing idle GPUs, reclaiming them, and why runs wait",
          "[control-plane][teams]") {
  Plane p;
  auto w1 = p.Worker("node-1");
  auto w2 = p.Worker("node-2");
  // Admins set the teams up with mcli: a quota of one node each in the cluster of two.
  for (const std::string args :
       {"admin create-team vision", "admin create-team speech --share 2",
        "admin add-user ann --team vision", "admin add-user bob --team speech",
        "admin set-quota --team vision --cluster local --gpus 8",
        "admin set-quota --team speech --cluster local --gpus 8"}) {
    const ShellResult r = p.Mcli(p.admin_key, args);
    INFO(args << ": " << r.output);
    REQUIRE(r.exit_code == 0);
  }
  // A user may read teams but not change them.
  const ShellResult refused = p.Mcli(p.ann_key,
                                     "admin set-quota --team vision --cluster local "
                                     "--gpus 16");
  CHECK(refused.exit_code != 0);
  CHECK_THAT(refused.output, Catch::Contains("PERMISSION_DENIED") ||
                                 Catch::Contains("permission") || Catch::Contains("may not"));
  const ShellResult teams = p.Mcli(p.ann_key, "get teams");
  CHECK_THAT(teams.output, Catch::Contains("vision") && Catch::Contains("local=8"));

  Client ann(p.server.endpoint(), p.ann_key);
  Client bob(p.server.endpoint(), p.bob_key);
  // Larger than its team's quota and not preemptible: refused at submit, saying why.
  v1::SubmitRunResponse resp;
  grpc::Status st = ann.runs->SubmitRun(ann.Ctx().get(), RunOf("too-big", 16, false), &resp);
  CHECK(st.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(st.error_message(), Catch::Contains("team vision") && Catch::Contains("quota"));

  // Ann's first run is within her team's quota; her second, preemptible, borrows the idle node.
  REQUIRE(ann.runs->SubmitRun(ann.Ctx().get(), RunOf("within", 8, true), &resp).ok());
  const v1::Run within = resp.run();
  CHECK(within.team() == "vision");
  ann.WaitForStatus(within.name(), v1::RUN_STATUS_RUNNING);
  REQUIRE(ann.runs->SubmitRun(ann.Ctx().get(), RunOf("borrower", 8, true), &resp).ok());
  const v1::Run borrower = resp.run();
  ann.WaitForStatus(borrower.name(), v1::RUN_STATUS_RUNNING);
  const ShellResult util = p.Mcli(p.ann_key, "util -o json");
  INFO(util.output);
  CHECK_THAT(absl::StrReplaceAll(util.output, {{" ", ""}, {"\n", ""}}),
             Catch::Contains("\"gpus_in_use\":16"));

  // Attack: turning the borrower into an owner. It may not stop being preemptible while it
  // holds the borrowed node, nor take priority high (which ann's team is not given).
  v1::UpdateRunRequest own;
  own.set_name(borrower.name());
  own.set_preemptible(false);
  v1::UpdateRunResponse updated;
  st = ann.runs->UpdateRun(ann.Ctx().get(), own, &updated);
  CHECK(st.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK_THAT(st.error_message(), Catch::Contains("borrowed beyond team vision's quota"));
  v1::UpdateRunRequest raise;
  raise.set_name(borrower.name());
  raise.set_priority(v1::PRIORITY_HIGH);
  st = ann.runs->UpdateRun(ann.Ctx().get(), raise, &updated);
  CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK_THAT(st.error_message(), Catch::Contains("--high-priority-teams") &&
                                     Catch::Contains("ann (team vision) is not one of them"));
  st = ann.runs->SubmitRun(ann.Ctx().get(), RunOf("urgent", 8, true, v1::PRIORITY_HIGH), &resp);
  CHECK(st.error_code() == grpc::StatusCode::PERMISSION_DENIED);
  CHECK(ann.Get(borrower.name()).spec().scheduling().preemptible());

  // Bob's team is within its quota: the borrowed node comes back, whatever the priorities.
  REQUIRE(bob.runs->SubmitRun(bob.Ctx().get(), RunOf("bobs", 8, false, v1::PRIORITY_LOWEST), &resp)
              .ok());
  const v1::Run bobs = resp.run();
  bob.WaitForStatus(bobs.name(), v1::RUN_STATUS_RUNNING, absl::Seconds(30));
  const v1::Run requeued = ann.WaitForStatus(borrower.name(), v1::RUN_STATUS_QUEUED);
  CHECK(requeued.retries_used() == 0);
  const v1::RunDescription d = ann.Describe(borrower.name());
  bool reclaimed = false;
  for (const auto& e : d.events()) {
    reclaimed |= e.message() ==
                 "Run was preempted to return borrowed GPUs (team vision is over its quota; "
                 "team speech needs them)";
  }
  CHECK(reclaimed);
  CHECK(ann.Get(within.name()).status() == v1::RUN_STATUS_RUNNING);

  // The borrower now waits, and the queue says why.
  const ShellResult queue = p.Mcli(p.ann_key, "get queue");
  INFO(queue.output);
  CHECK_THAT(queue.output,
             Catch::Contains(borrower.name()) &&
                 Catch::Contains("team quota reached (8/8 GPUs of team vision in use): waiting "
                                 "to borrow idle GPUs, 0 free"));

  const ShellResult described = p.Mcli(p.ann_key, "describe run " + borrower.name());
  INFO(described.output);
  CHECK_THAT(described.output, Catch::Contains("Queue: position 1 of 1: team quota reached"));

  // Usage: everyone's for an operator, their own for a user, in CSV too.
  for (const v1::Run& run : {ann.Get(within.name()), bob.Get(bobs.name())}) {
    REQUIRE(run.nodes_size() == 1);
    FakeWorker& worker = run.nodes(0).node_name() == "node-1" ? *w1 : *w2;
    worker.Finish(run.id(), run.resumption_index(), 0);
  }
  ann.WaitForStatus(within.name(), v1::RUN_STATUS_COMPLETED);
  const ShellResult all = p.Mcli(p.admin_key, "get usage -o csv");
  INFO(all.output);
  REQUIRE(all.exit_code == 0);
  CHECK_THAT(all.output, Catch::StartsWith("day,cluster,team,user,outcome,gpu_hours,attempts"));
  CHECK_THAT(all.output, Catch::Contains(",local,vision,ann,completed,") &&
                             Catch::Contains(",local,vision,ann,preempted,") &&
                             Catch::Contains(",local,speech,bob,"));
  const ShellResult mine = p.Mcli(p.bob_key, "get usage");
  INFO(mine.output);
  CHECK_THAT(mine.output, Catch::Contains("bob") && !Catch::Contains("ann"));
}

}  // namespace teams_test
}  // namespace tessera::testing
