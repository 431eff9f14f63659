// Teams: members in one team at most, quotas and shares, in both stores alike.

#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace teams_conformance {

v1::Team NewTeam(const std::string& name) {
  v1::Team team;
  team.set_name(name);
  team.set_share(1);
  *team.mutable_created_at() = ToProtoTime(T(0));
  return team;
}

v1::TeamQuota Quota(const std::string& cluster, const std::string& gpu_type, int gpus) {
  v1::TeamQuota quota;
  quota.set_cluster(cluster);
  quota.set_gpu_type(gpu_type);
  quota.set_gpus(gpus);
  return quota;
}

CONFORMANCE_CASE("teams: created once, listed by name, deleted with their memberships") {
  Stores stores = FreshStores();
  REQUIRE(stores.teams->CreateTeam(NewTeam("vision")).ok());
  REQUIRE(stores.teams->CreateTeam(NewTeam("speech")).ok());
  CHECK(stores.teams->CreateTeam(NewTeam("vision")).code() == absl::StatusCode::kAlreadyExists);
  auto teams = stores.teams->ListTeams();
  REQUIRE(teams.ok());
  REQUIRE(teams->size() == 2);
  CHECK((*teams)[0].name() == "speech");
  CHECK((*teams)[1].name() == "vision");
  REQUIRE(stores.teams->AddMember("vision", "ann").ok());
  CHECK(*stores.teams->TeamOfUser("ann") == "vision");
  REQUIRE(stores.teams->DeleteTeam("vision").ok());
  CHECK(*stores.teams->TeamOfUser("ann") == "");
  CHECK(stores.teams->DeleteTeam("vision").code() == absl::StatusCode::kNotFound);
  CHECK(stores.teams->GetTeam("vision").status().code() == absl::StatusCode::kNotFound);
  // The user is free to join another team.
  REQUIRE(stores.teams->AddMember("speech", "ann").ok());
}

CONFORMANCE_CASE("teams: a user belongs to one team at most; members are kept sorted") {
  Stores stores = FreshStores();
  REQUIRE(stores.teams->CreateTeam(NewTeam("a")).ok());
  REQUIRE(stores.teams->CreateTeam(NewTeam("b")).ok());
  REQUIRE(stores.teams->AddMember("a", "zoe").ok());
  REQUIRE(stores.teams->AddMember("a", "bob").ok());
  auto again = stores.teams->AddMember("a", "zoe");  // twice: fine
  REQUIRE(again.ok());
  CHECK(std::vector<std::string>(again->members().begin(), again->members().end()) ==
        std::vector<std::string>{"bob", "zoe"});
  auto other = stores.teams->AddMember("b", "zoe");
  CHECK(other.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(other.status().message().find("team a") != std::string::npos);
  CHECK(stores.teams->AddMember("nope", "x").status().code() == absl::StatusCode::kNotFound);
  auto removed = stores.teams->RemoveMember("a", "zoe");
  REQUIRE(removed.ok());
  CHECK(removed->members_size() == 1);
  CHECK(*stores.teams->TeamOfUser("zoe") == "");
  CHECK(stores.teams->RemoveMember("a", "zoe").status().code() == absl::StatusCode::kNotFound);
  REQUIRE(stores.teams->AddMember("b", "zoe").ok());
  CHECK(*stores.teams->TeamOfUser("zoe") == "b");
}

CONFORMANCE_CASE("teams: quotas per cluster and GPU type are set, replaced and removed") {
  Stores stores = FreshStores();
  REQUIRE(stores.teams->CreateTeam(NewTeam("a")).ok());
  REQUIRE(stores.teams->SetQuota("a", Quota("c2", "", 64), false).ok());
  REQUIRE(stores.teams->SetQuota("a", Quota("c1", "h100", 16), false).ok());
  REQUIRE(stores.teams->SetQuota("a", Quota("c1", "", 32), false).ok());
  auto team = stores.teams->SetQuota("a", Quota("c1", "h100", 24), false);
  REQUIRE(team.ok());
  REQUIRE(team->quotas_size() == 3);
  CHECK(team->quotas(0).cluster() == "c1");
  CHECK(team->quotas(0).gpu_type() == "");
  CHECK(team->quotas(0).gpus() == 32);
  CHECK(team->quotas(1).gpu_type() == "h100");
  CHECK(team->quotas(1).gpus() == 24);
  CHECK(team->quotas(2).cluster() == "c2");
  REQUIRE(stores.teams->SetQuota("a", Quota("c1", "h100", 0), true).ok());
  CHECK(stores.teams->SetQuota("a", Quota("c1", "h100", 0), true).status().code() ==
        absl::StatusCode::kNotFound);
  REQUIRE(stores.teams->SetShare("a", 2.5).ok());
  auto read = stores.teams->GetTeam("a");
  REQUIRE(read.ok());
  CHECK(read->quotas_size() == 2);
  CHECK(read->share() == 2.5);
  CHECK(stores.teams->SetShare("nope", 1).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace teams_conformance
}  // namespace tessera::store::conformance

namespace tessera::store::conformance {
namespace teams_conformance {

v1::Attempt Ran(const std::string& run_id, int resumption, int64_t start, int64_t end, int gpus) {
  v1::Attempt a;
  a.set_run_id(run_id);
  a.set_resumption_index(resumption);
  a.set_status(end >= 0 ? v1::RUN_STATUS_FAILED : v1::RUN_STATUS_RUNNING);
  v1::AttemptNode* node = a.add_nodes();
  node->set_node_name("n1");
  for (int i = 0; i < gpus; ++i) node->add_gpu_indices(i);
  *a.mutable_started_at() = ToProtoTime(T(start));
  if (end >= 0) {
    *a.mutable_ended_at() = ToProtoTime(T(end));
    a.set_end_reason(v1::ATTEMPT_END_REASON_PREEMPTED);
  }
  return a;
}

CONFORMANCE_CASE("usage: attempts that ran in the window, with their run's owner and team") {
  Stores stores = FreshStores();
  v1::Run run = MakeRun("train", 0, "ann");
  run.set_team("vision");
  REQUIRE(stores.runs->CreateRun(run, {}).ok());
  REQUIRE(stores.runs->PutAttempt(Ran(run.id(), 0, 100, 200, 8)).ok());  // before the window
  REQUIRE(stores.runs->PutAttempt(Ran(run.id(), 1, 300, 500, 4)).ok());  // ends inside it
  REQUIRE(stores.runs->PutAttempt(Ran(run.id(), 2, 600, -1, 2)).ok());   // still running
  v1::Attempt queued;                                                    // never started: no usage
  queued.set_run_id(run.id());
  queued.set_resumption_index(3);
  REQUIRE(stores.runs->PutAttempt(queued).ok());
  auto usage = stores.usage->ListAttemptUsage(T(400), T(1000));
  REQUIRE(usage.ok());
  REQUIRE(usage->size() == 2);
  const AttemptUsage& ended = (*usage)[0];
  CHECK(ended.run_name == "train");
  CHECK(ended.user == "ann");
  CHECK(ended.team == "vision");
  CHECK(ended.cluster == "c1");
  CHECK(ended.gpu_type == "h100");
  CHECK(ended.resumption_index == 1);
  CHECK(ended.gpus == 4);
  CHECK(ended.started_at == T(300));
  CHECK(ended.ended_at == T(500));
  CHECK(ended.end_reason == v1::ATTEMPT_END_REASON_PREEMPTED);
  const AttemptUsage& running = (*usage)[1];
  CHECK(running.resumption_index == 2);
  CHECK(running.ended_at == absl::InfiniteFuture());
  // A window that ends before an attempt starts leaves it out.
  auto early = stores.usage->ListAttemptUsage(T(0), T(250));
  REQUIRE(early.ok());
  REQUIRE(early->size() == 1);
  CHECK(early->front().resumption_index == 0);
}

}  // namespace teams_conformance
}  // namespace tessera::store::conformance
