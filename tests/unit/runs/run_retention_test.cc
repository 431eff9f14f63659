// The retention of finished runs: which runs go, that their logs go first, and that a log
// service that is away keeps the run.
#include <catch2/catch.hpp>

#include "base/timestamps.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs::testing {
namespace {

struct RetentionFixture : Fixture {
  RunManager retaining{stores.runs,
                       idem,
                       fit,
                       clock,
                       logs,
                       std::make_shared<SeededRandom>(7),
                       RunManagerOptions{.run_retention = absl::Hours(24)}};

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
  CHECK(*manager.ExpireFinishedRuns() == 0);
  CHECK(Exists("ancient"));
  CHECK(logs->deleted.empty());
}

// Lists the ended runs, then restarts them before the caller can act: a user's restart racing
// the retention.
class RestartAfterListing final : public store::RunStore {
 public:
  explicit RestartAfterListing(std::shared_ptr<store::RunStore> inner) : inner_(std::move(inner)) {}
  absl::StatusOr<std::vector<v1::Run>> ListRunsEndedBefore(absl::Time before, int limit) override {
    auto listed = inner_->ListRunsEndedBefore(before, limit);
    if (!listed.ok()) return listed;
    for (v1::Run run : *listed) {
      run.set_status(v1::RUN_STATUS_QUEUED);
      if (!inner_->UpdateRun(run, run.version(), {}).ok()) return absl::InternalError("restart");
    }
    return listed;
  }
  absl::StatusOr<v1::Run> CreateRun(const v1::Run& run, const std::vector<v1::RunEvent>& events,
                                    const std::optional<store::IdempotentRunWrite>& idem) override {
    return inner_->CreateRun(run, events, idem);
  }
  absl::StatusOr<v1::Run> UpdateRun(const v1::Run& run, int64_t expected_version,
                                    const std::vector<v1::RunEvent>& events,
                                    const std::vector<v1::Attempt>& attempts,
                                    const std::optional<store::WriteFence>& fence,
                                    const std::optional<store::IdempotentRunWrite>& idem) override {
    return inner_->UpdateRun(run, expected_version, events, attempts, fence, idem);
  }
  absl::Status DeleteRun(std::string_view id, const std::optional<store::IdempotentRunWrite>& idem,
                         std::optional<int64_t> expected_version) override {
    return inner_->DeleteRun(id, idem, expected_version);
  }
  absl::StatusOr<v1::Run> GetRun(std::string_view name) override { return inner_->GetRun(name); }
  absl::StatusOr<v1::Run> GetRunById(std::string_view id) override {
    return inner_->GetRunById(id);
  }
  absl::StatusOr<std::vector<v1::Run>> ListRuns(const v1::RunFilter& filter) override {
    return inner_->ListRuns(filter);
  }
  absl::Status PutAttempt(const v1::Attempt& attempt) override {
    return inner_->PutAttempt(attempt);
  }
  absl::StatusOr<std::vector<v1::Attempt>> ListAttempts(std::string_view run_id) override {
    return inner_->ListAttempts(run_id);
  }
  absl::StatusOr<v1::RunEvent> AppendEvent(const v1::RunEvent& event) override {
    return inner_->AppendEvent(event);
  }
  absl::StatusOr<std::vector<v1::RunEvent>> ListEvents(std::string_view run_id, int64_t after_id,
                                                       int limit) override {
    return inner_->ListEvents(run_id, after_id, limit);
  }
  absl::StatusOr<std::vector<v1::RunEvent>> ListAllEvents(int64_t after_id, int limit) override {
    return inner_->ListAllEvents(after_id, limit);
  }
  absl::StatusOr<int64_t> UserUid(std::string_view user) override { return inner_->UserUid(user); }

 private:
  std::shared_ptr<store::RunStore> inner_;
};

TEST_CASE_METHOD(RetentionFixture, "a run restarted while the retention looks at it is kept") {
  Store("old", v1::RUN_STATUS_COMPLETED, absl::Hours(30));
  RunManager racing{std::make_shared<RestartAfterListing>(stores.runs),
                    idem,
                    fit,
                    clock,
                    logs,
                    std::make_shared<SeededRandom>(7),
                    RunManagerOptions{.run_retention = absl::Hours(24)}};
  auto deleted = racing.ExpireFinishedRuns();
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
  RunManager retaining{stores.runs,
                       std::make_shared<IdempotentCalls>(stores.idempotency, clock),
                       std::make_shared<FakeFit>(),
                       clock,
                       logs,
                       std::make_shared<SeededRandom>(7),
                       RunManagerOptions{.run_retention = absl::Hours(1)}};
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

}  // namespace
}  // namespace tessera::runs::testing
