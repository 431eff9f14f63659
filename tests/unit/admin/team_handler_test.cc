// Teams through their handler: names and numbers checked, usage visible to its owner and to
// operators, and GPU-hours summed per day from attempts' real times.

#include "services/admin/team_handler.h"

#include <catch2/catch.hpp>

#include "base/clock.h"
#include "base/timestamps.h"
#include "services/admin/usage_report.h"
#include "services/store/memory/memory_database.h"

namespace tessera::admin {
namespace team_handler_test {

const absl::Time kMidnight = absl::FromCivil(absl::CivilDay(2026, 11, 20), absl::UTCTimeZone());

auth::Principal Person(const std::string& user, v1::Role role = v1::ROLE_USER) {
  auth::Principal p;
  p.user = user;
  p.role = role;
  return p;
}

store::AttemptUsage Attempt(const std::string& user, const std::string& team, int gpus,
                            absl::Time start, absl::Time end,
                            v1::AttemptEndReason reason = v1::ATTEMPT_END_REASON_SUCCEEDED) {
  store::AttemptUsage a;
  a.run_id = "r-" + user;
  a.user = user;
  a.team = team;
  a.cluster = "c1";
  a.gpus = gpus;
  a.started_at = start;
  a.ended_at = end;
  a.end_reason = reason;
  return a;
}

TEST_CASE("Teams: bad names, shares and quotas are refused, naming the field", "[teams]") {
  auto stores = store::MakeMemoryStores();
  auto clock = std::make_shared<FakeClock>(kMidnight);
  TeamHandler h(stores.teams, clock, stores.usage);
  const auto admin = Person("root", v1::ROLE_ADMIN);
  v1::CreateTeamRequest create;
  v1::CreateTeamResponse created;
  create.set_name("Bad Name!");
  auto st = h.CreateTeam(admin, create, &created);
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(st.message()).rfind("name:", 0) == 0);
  create.set_name("vision");
  create.set_share(-2);
  st = h.CreateTeam(admin, create, &created);
  CHECK(std::string(st.message()).rfind("share:", 0) == 0);
  create.set_share(0);  // 0: the default, 1
  REQUIRE(h.CreateTeam(admin, create, &created).ok());
  CHECK(created.team().share() == 1);
  CHECK(created.team().created_at().seconds() == absl::ToUnixSeconds(kMidnight));

  v1::SetTeamQuotaRequest quota;
  v1::SetTeamQuotaResponse set;
  quota.set_team("vision");
  quota.set_cluster("c1");
  quota.set_gpus(-1);
  st = h.SetTeamQuota(admin, quota, &set);
  CHECK(std::string(st.message()).rfind("gpus:", 0) == 0);
  quota.set_gpus(64);
  quota.set_gpu_type("h100");
  REQUIRE(h.SetTeamQuota(admin, quota, &set).ok());
  REQUIRE(set.team().quotas_size() == 1);
  CHECK(set.team().quotas(0).gpus() == 64);
  quota.set_team("nobody");
  CHECK(h.SetTeamQuota(admin, quota, &set).code() == absl::StatusCode::kNotFound);
}

TEST_CASE("Usage: a user sees only their own, operators see everyone's", "[teams][usage]") {
  auto db = std::make_shared<store::MemoryDatabase>();
  auto stores = store::MakeMemoryStores(db);
  auto clock = std::make_shared<FakeClock>(kMidnight + absl::Hours(48));
  TeamHandler h(stores.teams, clock, stores.usage);
  for (const std::string user : {"ann", "bob"}) {
    v1::Run run;
    run.set_id("r-" + user);
    run.set_name("train-" + user);
    run.set_user(user);
    run.set_team(user == "ann" ? "vision" : "speech");
    run.mutable_spec()->mutable_compute()->set_cluster("c1");
    REQUIRE(stores.runs->CreateRun(run, {}).ok());
    v1::Attempt attempt;
    attempt.set_run_id(run.id());
    attempt.add_nodes()->add_gpu_indices(0);
    *attempt.mutable_started_at() = ToProtoTime(kMidnight + absl::Hours(1));
    *attempt.mutable_ended_at() = ToProtoTime(kMidnight + absl::Hours(3));
    attempt.set_end_reason(v1::ATTEMPT_END_REASON_SUCCEEDED);
    REQUIRE(stores.runs->PutAttempt(attempt).ok());
  }
  v1::GetUsageRequest req;
  v1::GetUsageResponse mine;
  REQUIRE(h.GetUsage(Person("ann"), req, &mine).ok());
  REQUIRE(mine.rows_size() == 1);
  CHECK(mine.rows(0).user() == "ann");
  CHECK(mine.rows(0).team() == "vision");
  CHECK(mine.rows(0).gpu_hours() == Approx(2.0));
  CHECK(mine.rows(0).day() == "2026-11-20");
  req.set_user("bob");
  v1::GetUsageResponse theirs;
  CHECK(h.GetUsage(Person("ann"), req, &theirs).code() == absl::StatusCode::kPermissionDenied);
  req.clear_user();
  v1::GetUsageResponse all;
  REQUIRE(h.GetUsage(Person("op", v1::ROLE_OPERATOR), req, &all).ok());
  CHECK(all.rows_size() == 2);
  req.set_team("speech");
  v1::GetUsageResponse team;
  REQUIRE(h.GetUsage(Person("op", v1::ROLE_OPERATOR), req, &team).ok());
  REQUIRE(team.rows_size() == 1);
  CHECK(team.rows(0).user() == "bob");
  // A window the wrong way round names the field.
  *req.mutable_since() = ToProtoTime(kMidnight + absl::Hours(10));
  *req.mutable_until() = ToProtoTime(kMidnight);
  CHECK(std::string(h.GetUsage(Person("op", v1::ROLE_OPERATOR), req, &team).message())
            .rfind("since:", 0) == 0);
}

TEST_CASE("Usage: GPU-hours split at UTC midnights, by outcome, within the window",
          "[teams][usage]") {
  const std::vector<store::AttemptUsage> attempts = {
      // 8 GPUs from 22:00 to 02:00 the next day: 16 GPU-hours on each day.
      Attempt("ann", "vision", 8, kMidnight - absl::Hours(2), kMidnight + absl::Hours(2)),
      // Preempted after 30 minutes on 2 GPUs.
      Attempt("ann", "vision", 2, kMidnight + absl::Hours(5), kMidnight + absl::Hours(5.5),
              v1::ATTEMPT_END_REASON_PREEMPTED),
      // Still running: counted up to the window's end.
      Attempt("bob", "", 1, kMidnight + absl::Hours(10), absl::InfiniteFuture()),
  };
  const auto rows =
      SummarizeUsage(attempts, kMidnight - absl::Hours(24), kMidnight + absl::Hours(12));
  REQUIRE(rows.size() == 4);
  CHECK(rows[0].day() == "2026-11-19");
  CHECK(rows[0].gpu_hours() == Approx(16));
  CHECK(rows[0].outcome() == "completed");
  // Sorted by day, cluster, team ("" first), user, outcome.
  CHECK(rows[1].day() == "2026-11-20");
  CHECK(rows[1].user() == "bob");
  CHECK(rows[1].outcome() == "running");
  CHECK(rows[1].gpu_hours() == Approx(2));
  CHECK(rows[2].user() == "ann");
  CHECK(rows[2].outcome() == "completed");
  CHECK(rows[2].gpu_hours() == Approx(16));
  CHECK(rows[3].outcome() == "preempted");
  CHECK(rows[3].gpu_hours() == Approx(1));
  CHECK(UsageOutcome(Attempt("x", "", 1, kMidnight, kMidnight + absl::Hours(1),
                             v1::ATTEMPT_END_REASON_NODE_FAILURE)) == "node failure");
}

}  // namespace team_handler_test
}  // namespace tessera::admin
