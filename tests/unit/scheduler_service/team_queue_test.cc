// Teams in the scheduler's node API: the fit check against quotas and the team recorded, the
// queue's reasons in words, fair share reading usage, and mcli util's figures.
#include <catch2/catch.hpp>

#include "base/timestamps.h"
#include "scheduler/service/node_api.h"
#include "services/store/memory/memory_database.h"
#include "tests/unit/scheduler_service/fake_scheduler_clients.h"

namespace tessera::scheduler {
namespace team_queue_test {

const auth::Principal kAnn{"ann", v1::ROLE_USER};
const auth::Principal kBob{"bob", v1::ROLE_USER};

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<ListedRuns> runs = std::make_shared<ListedRuns>();
  std::shared_ptr<TeamPolicy> policy =
      std::make_shared<TeamPolicy>(stores.teams, clock, absl::Seconds(5), stores.usage);
  NodeApi api{stores.nodes, runs, std::make_shared<IdempotentCalls>(stores.idempotency, clock),
              policy, clock};

  Fixture() {
    for (const std::string name : {"n1", "n2"}) {
      v1::Node n;
      n.set_name(name);
      n.set_cluster("c1");
      n.set_gpu_type("h100");
      n.set_gpu_count(8);
      n.set_liveness(v1::NODE_LIVENESS_ONLINE);
      n.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
      n.set_health(v1::NODE_HEALTH_HEALTHY);
      REQUIRE(stores.nodes->CreateNode(n).ok());
    }
    for (const std::string team : {"vision", "speech"}) {
      v1::Team t;
      t.set_name(team);
      t.set_share(1);
      REQUIRE(stores.teams->CreateTeam(t).ok());
      v1::TeamQuota q;
      q.set_cluster("c1");
      q.set_gpus(8);
      REQUIRE(stores.teams->SetQuota(team, q, false).ok());
    }
    REQUIRE(stores.teams->AddMember("vision", "ann").ok());
    REQUIRE(stores.teams->AddMember("speech", "bob").ok());
  }

  v1::Run AddRun(const std::string& name, const std::string& user, const std::string& team,
                 v1::RunStatus status, int gpus, const std::string& node = "",
                 bool preemptible = false) {
    v1::Run r;
    r.set_id("id-" + name);
    r.set_name(name);
    r.set_user(user);
    r.set_team(team);
    r.set_status(status);
    r.mutable_spec()->set_name(name);
    r.mutable_spec()->mutable_compute()->set_cluster("c1");
    r.mutable_spec()->mutable_compute()->set_gpus(gpus);
    r.mutable_spec()->mutable_scheduling()->set_preemptible(preemptible);
    *r.mutable_created_at() = ToProtoTime(clock->Now());
    if (!node.empty()) {
      auto* n = r.add_nodes();
      n->set_node_name(node);
      for (int i = 0; i < gpus; ++i) n->add_gpu_indices(i);
    }
    runs->runs.push_back(r);
    return r;
  }
};

TEST_CASE("teams: the fit check names the team, and refuses what its quota can never hold") {
  Fixture f;
  v1::CheckFitRequest req;
  v1::CheckFitResponse resp;
  req.set_user("ann");
  req.mutable_compute()->set_cluster("c1");
  req.mutable_compute()->set_gpus(8);
  REQUIRE(f.api.CheckFit(kAnn, req, &resp).ok());
  CHECK(resp.team() == "vision");
  req.mutable_compute()->set_gpus(16);
  const absl::Status st = f.api.CheckFit(kAnn, req, &resp);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()),
             Catch::StartsWith("compute.gpus: 16 GPUs can never start for team vision: its quota "
                               "in cluster c1 (h100) is 8 GPUs"));
  // A preemptible run may borrow: it fits.
  req.set_preemptible(true);
  CHECK(f.api.CheckFit(kAnn, req, &resp).ok());
  // A user in no team has no quota in a managed cluster: only preemptible runs.
  req.set_user("cat");
  req.set_preemptible(false);
  req.mutable_compute()->set_gpus(1);
  CHECK_THAT(std::string(f.api.CheckFit(kAnn, req, &resp).message()),
             Catch::Contains("a user in no team"));
}

TEST_CASE("teams: the queue says why each run waits, quotas and borrowing included") {
  Fixture f;
  f.AddRun("ann-running", "ann", "vision", v1::RUN_STATUS_RUNNING, 8, "n1");
  f.AddRun("ann-more", "ann", "vision", v1::RUN_STATUS_QUEUED, 8);
  f.AddRun("ann-borrow", "ann", "vision", v1::RUN_STATUS_QUEUED, 8, "", true);
  v1::GetQueueRequest req;
  v1::GetQueueResponse resp;
  REQUIRE(f.api.GetQueue(kAnn, req, &resp).ok());
  REQUIRE(resp.entries_size() == 2);
  std::map<std::string, std::string> why;
  for (const auto& e : resp.entries()) why[e.run().name()] = e.waiting_reason();
  CHECK(why["ann-more"] ==
        "team quota reached (8/8 GPUs of team vision in use; non-preemptible runs may not borrow "
        "idle GPUs)");
  CHECK(why["ann-borrow"] == "placed in the next cycle, on borrowed GPUs");
  // Bob sees ann's runs anonymised, their team shown.
  v1::GetQueueResponse bobs;
  REQUIRE(f.api.GetQueue(kBob, req, &bobs).ok());
  CHECK(bobs.entries(0).run().name() == "(another user's run)");
  CHECK(bobs.entries(0).run().team() == "vision");
}

TEST_CASE("teams: fair share puts the team that used less first within a priority") {
  Fixture f;
  // Yesterday ann (vision) used 8 GPUs for a day.
  v1::Run old = f.AddRun("ann-yesterday", "ann", "vision", v1::RUN_STATUS_COMPLETED, 8);
  REQUIRE(f.stores.runs->CreateRun(old, {}).ok());
  v1::Attempt a;
  a.set_run_id(old.id());
  a.add_nodes()->add_gpu_indices(0);
  for (int i = 1; i < 8; ++i) a.mutable_nodes(0)->add_gpu_indices(i);
  *a.mutable_started_at() = ToProtoTime(f.clock->Now() - absl::Hours(30));
  *a.mutable_ended_at() = ToProtoTime(f.clock->Now() - absl::Hours(6));
  REQUIRE(f.stores.runs->PutAttempt(a).ok());
  f.runs->runs.clear();
  // Ann's run was submitted first, bob's later; both fit only one at a time on n1.
  f.AddRun("busy", "zed", "", v1::RUN_STATUS_RUNNING, 8, "n2");
  f.AddRun("ann-first", "ann", "vision", v1::RUN_STATUS_QUEUED, 8);
  f.clock->Advance(absl::Minutes(1));
  f.AddRun("bob-later", "bob", "speech", v1::RUN_STATUS_QUEUED, 8);
  v1::GetQueueResponse resp;
  REQUIRE(f.api.GetQueue(kAnn, v1::GetQueueRequest(), &resp).ok());
  REQUIRE(resp.entries_size() == 2);
  CHECK(resp.entries(0).run().name() == "(another user's run)");  // bob's, placed first
  CHECK(resp.entries(0).run().team() == "speech");
  CHECK(resp.entries(0).waiting_reason() == "placed in the next cycle");
  CHECK(resp.entries(1).run().name() == "ann-first");
}

TEST_CASE("teams: utilization per cluster, as mcli util shows it") {
  Fixture f;
  f.AddRun("running", "ann", "vision", v1::RUN_STATUS_RUNNING, 4, "n1");
  f.AddRun("queued", "bob", "speech", v1::RUN_STATUS_QUEUED, 8);
  f.AddRun("anywhere", "bob", "speech", v1::RUN_STATUS_QUEUED, 8);
  f.runs->runs.back().mutable_spec()->mutable_compute()->clear_cluster();
  v1::Node cordoned = *f.stores.nodes->GetNode("n2");
  cordoned.set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  REQUIRE(f.stores.nodes->UpdateNode(cordoned, cordoned.version(), {}).ok());
  v1::GetUtilizationResponse resp;
  REQUIRE(f.api.GetUtilization(kAnn, v1::GetUtilizationRequest(), &resp).ok());
  REQUIRE(resp.clusters_size() == 1);
  const v1::ClusterUtilization& c = resp.clusters(0);
  CHECK(c.cluster() == "c1");
  CHECK(c.nodes() == 2);
  CHECK(c.gpus_total() == 16);
  CHECK(c.gpus_in_use() == 4);
  CHECK(c.gpus_free() == 4);
  CHECK(c.gpus_cordoned() == 8);
  CHECK(c.runs_running() == 1);
  CHECK(c.runs_queued() == 1);
  CHECK(resp.runs_queued_any_cluster() == 1);
  REQUIRE(c.gpu_types_size() == 1);
  CHECK(c.gpu_types(0) == "h100");
}

}  // namespace team_queue_test
}  // namespace tessera::scheduler

namespace tessera::scheduler {
namespace team_queue_test {

TEST_CASE("teams: quotas are read at most every refresh, and kept while the store is down") {
  auto clock = std::make_shared<FakeClock>();
  auto db = std::make_shared<store::MemoryDatabase>();
  store::Stores stores = store::MakeMemoryStores(db);
  TeamPolicy policy(stores.teams, clock, absl::Seconds(5));
  CHECK(policy.Quotas().empty());
  v1::Team team;
  team.set_name("vision");
  REQUIRE(stores.teams->CreateTeam(team).ok());
  v1::TeamQuota quota;
  quota.set_cluster("c1");
  quota.set_gpus(8);
  REQUIRE(stores.teams->SetQuota("vision", quota, false).ok());
  CHECK(policy.Quotas().empty());  // read less than 5 s ago
  clock->Advance(absl::Seconds(5));
  auto quotas = policy.Quotas();
  REQUIRE(quotas.size() == 1);
  CHECK(quotas[0].team == "vision");
  CHECK(quotas[0].gpus == 8);
  // The database goes away: placement goes on with the quotas it had.
  db->SetUnavailable(true);
  clock->Advance(absl::Seconds(10));
  CHECK(policy.Quotas().size() == 1);
  CHECK_FALSE(policy.TeamOfUser("ann").ok());
}

}  // namespace team_queue_test
}  // namespace tessera::scheduler
