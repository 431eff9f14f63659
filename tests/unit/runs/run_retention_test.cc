// The retention of finished runs: which runs go, that their logs go first, and that a log
// service that is away keeps the run.
#include <catch2/catch.hpp>

#include "base/timestamps.h"
#include "tests/unit/runs/forwarding_run_store.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs::testing {
namespace run_retention_test {

struct RetentionFixture : Fixture {
  // The upkeep over `runs` that deletes runs a day after they ended.
  std::shared_ptr<RunUpkeep> Retaining(std::shared_ptr<store::RunStore> runs) {
    return Make(RunManagerOptions{.run_retention = absl::Hours(24)}, nullptr, nullptr,
                std::move(runs))
        .upkeep;
  }
  std::shared_ptr<RunUpkeep> retaining_ = Retaining(stores.runs);
  RunUpkeep& retaining = *retaining_;

  // A run stored with `status`, ended `ago` before now (none: it has not ended).
  void Store(const std::string& name, v1::RunStatus status,
             std::optional<absl::Duration> ago = std::nullopt) {
    v1::Run run;
    run.set_id("id-" + name);
    run.set_name(name);
    run.set_user("alice");
    run.set_status(status);
    *run.mutable_created_at() = ToProtoTime(clock->Now() - absl::Hours(100));
    if (ago) *run.mutable_ended_at() = ToProtoTime(clock->Now() - *ago);
    REQUIRE(stores.runs->CreateRun(run, {}).ok());
  }
  bool Exists(const std::string& name) { return stores.runs->GetRun(name).ok(); }
};

TEST_CASE_METHOD(RetentionFixture, "retention deletes runs that ended over the period ago") {
  Store("old-completed", v1::RUN_STATUS_COMPLETED, absl::Hours(25));
  Store("old-failed", v1::RUN_STATUS_FAILED, absl::Hours(48));
  Store("recent", v1::RUN_STATUS_STOPPED, absl::Hours(23));
  Store("running", v1::RUN_STATUS_RUNNING);
  REQUIRE(stores.runs
              ->AppendEvent([] {
                v1::RunEvent e;
                e.set_run_id("id-old-failed");
                e.set_message("Run failed");
                return e;
              }())
              .ok());

  auto deleted = retaining.ExpireFinishedRuns();
  REQUIRE(deleted.ok());
  CHECK(*deleted == 2);
  CHECK_FALSE(Exists("old-completed"));
  CHECK_FALSE(Exists("old-failed"));
  CHECK(stores.runs->ListEvents("id-old-failed")->empty());
  CHECK(Exists("recent"));
  CHECK(Exists("running"));
  // Their logs were deleted, the earliest ended first.
  CHECK(logs->deleted == std::vector<std::string>{"id-old-failed", "id-old-completed"});

  // Exactly the period after its end it is kept; a second later it goes too.
  clock->Advance(absl::Hours(1));
  CHECK(*retaining.ExpireFinishedRuns() == 0);
  CHECK(Exists("recent"));
  clock->Advance(absl::Seconds(1));
  CHECK(*retaining.ExpireFinishedRuns() == 1);
  CHECK_FALSE(Exists("recent"));
  CHECK(Exists("running"));
  CHECK(*retaining.ExpireFinishedRuns() == 0);
}

TEST_CASE_METHOD(RetentionFixture, "a run whose logs cannot be deleted is kept until they can") {
  Store("old", v1::RUN_STATUS_COMPLETED, absl::Hours(30));
  logs->result = absl::UnavailableError("log service unreachable");
  auto deleted = retaining.ExpireFinishedRuns();
  REQUIRE(deleted.ok());
  CHECK(*deleted == 0);
  CHECK(Exists("old"));

  logs->result = absl::OkStatus();
  CHECK(*retaining.ExpireFinishedRuns() == 1);
  CHECK_FALSE(Exists("old"));
}

TEST_CASE_METHOD(RetentionFixture, "a backlog of ended runs goes in batches within one call") {
  for (int i = 0; i < 450; ++i) {
    Store(absl::StrCat("old-", i), v1::RUN_STATUS_COMPLETED, absl::Hours(25) + absl::Seconds(i));
  }
  Store("recent", v1::RUN_STATUS_COMPLETED, absl::Hours(1));
  CHECK(*retaining.ExpireFinishedRuns() == 450);
  CHECK(logs->deleted.size() == 450);
  v1::RunFilter all;
  auto left = stores.runs->ListRuns(all);
  REQUIRE(left.ok());
  REQUIRE(left->size() == 1);
  CHECK(left->front().name() == "recent");
}

TEST_CASE_METHOD(RetentionFixture, "without a retention period no run is deleted") {
  Store("ancient", v1::RUN_STATUS_COMPLETED, absl::Hours(24 * 3650));
  CHECK(*upkeep.ExpireFinishedRuns() == 0);
  CHECK(Exists("ancient"));
  CHECK(logs->deleted.empty());
}

// Lists the ended runs, then restarts them before the caller can act: a user's restart racing
// the retention.
class RestartAfterListing final : public ForwardingRunStore {
 public:
  using ForwardingRunStore::ForwardingRunStore;
  absl::StatusOr<std::vector<v1::Run>> ListRunsEndedBefore(absl::Time before, int limit) override {
    auto listed = inner()->ListRunsEndedBefore(before, limit);
    if (!listed.ok()) return listed;
    for (v1::Run run : *listed) {
      run.set_status(v1::RUN_STATUS_QUEUED);
      if (!inner()->UpdateRun(run, run.version(), {}).ok()) return absl::InternalError("restart");
    }
    return listed;
  }
};

TEST_CASE_METHOD(RetentionFixture, "a run restarted while the retention looks at it is kept") {
  Store("old", v1::RUN_STATUS_COMPLETED, absl::Hours(30));
  auto racing = Retaining(std::make_shared<RestartAfterListing>(stores.runs));
  auto deleted = racing->ExpireFinishedRuns();
  REQUIRE(deleted.ok());
  CHECK(*deleted == 0);
  auto run = stores.runs->GetRun("old");
  REQUIRE(run.ok());
  CHECK(run->status() == v1::RUN_STATUS_QUEUED);
  // Its earlier attempts' logs went (they were past the retention); the run and what it prints
  // from now on stay.
}

TEST_CASE("the database away fails the pass and deletes nothing") {
  auto db = std::make_shared<store::MemoryDatabase>();
  store::Stores stores = store::MakeMemoryStores(db);
  auto clock = std::make_shared<FakeClock>();
  auto logs = std::make_shared<FakeLogDeleter>();
  Runs roles = MakeRuns(
      RunsDependencies{.runs = stores.runs,
                       .idem = std::make_shared<IdempotentCalls>(stores.idempotency, clock),
                       .fit = std::make_shared<FakeFit>(),
                       .clock = clock,
                       .logs = logs,
                       .options = RunManagerOptions{.run_retention = absl::Hours(1)}});
  RunUpkeep& retaining = *roles.upkeep;
  v1::Run run;
  run.set_id("id-old");
  run.set_name("old");
  run.set_status(v1::RUN_STATUS_COMPLETED);
  *run.mutable_ended_at() = ToProtoTime(clock->Now() - absl::Hours(2));
  REQUIRE(stores.runs->CreateRun(run, {}).ok());

  db->SetUnavailable(true);
  CHECK(absl::IsUnavailable(retaining.ExpireFinishedRuns().status()));
  db->SetUnavailable(false);
  CHECK(stores.runs->GetRun("old").ok());
  CHECK(logs->deleted.empty());
  CHECK(*retaining.ExpireFinishedRuns() == 1);
}

}  // namespace run_retention_test
}  // namespace tessera::runs::testing
