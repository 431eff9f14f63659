// The writer every role of the run service changes runs through: a change that loses a race is
// applied again to the winner's copy, one that changes nothing writes nothing, and reads answer
// only what the caller may see or change.
#include "services/runs/run_writer.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "services/store/memory/memory_database.h"
#include "tests/unit/runs/forwarding_run_store.h"

namespace tessera::runs {
namespace run_writer_test {

// Another writer changes the run between this writer's read and its write, `races` times.
class RacingRunStore final : public testing::ForwardingRunStore {
 public:
  using ForwardingRunStore::ForwardingRunStore;
  int races = 0;
  int updates = 0;
  absl::StatusOr<v1::Run> UpdateRun(const v1::Run& run, int64_t expected_version,
                                    const std::vector<v1::RunEvent>& events,
                                    const std::vector<v1::Attempt>& attempts,
                                    const std::optional<store::WriteFence>& fence,
                                    const std::optional<store::IdempotentRunWrite>& idem) override {
    ++updates;
    if (races > 0) {
      --races;
      v1::Run other = *inner()->GetRunById(run.id());
      (*other.mutable_spec()->mutable_metadata())["other"] = "writer";
      REQUIRE(inner()->UpdateRun(other, other.version(), {}, {}, {}, {}).ok());
    }
    return inner()->UpdateRun(run, expected_version, events, attempts, fence, idem);
  }
};

struct Fixture {
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<RacingRunStore> runs = std::make_shared<RacingRunStore>(stores.runs);
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  RunWriter writer{runs, clock, nullptr};

  v1::Run Create(const std::string& name, const std::string& user) {
    v1::Run run;
    run.set_id("id-" + name);
    run.set_name(name);
    run.set_user(user);
    run.set_status(v1::RUN_STATUS_QUEUED);
    return *stores.runs->CreateRun(run, {}, std::nullopt);
  }
  // Counts the copies it was given and tags the run as `mine`.
  RunWriter::Change Tag(int* copies) {
    return [copies](const v1::Run& r, const std::vector<v1::Attempt>&) {
      ++*copies;
      Transition t{r, {}, {}, true};
      (*t.run.mutable_spec()->mutable_metadata())["mine"] = "yes";
      return absl::StatusOr<Transition>(t);
    };
  }
};

TEST_CASE("a change that loses a race is applied again to the winner's copy") {
  Fixture f;
  const v1::Run created = f.Create("train", "alice");
  f.runs->races = 2;
  int copies = 0;
  auto written = f.writer.Mutate(created.id(), f.Tag(&copies));
  REQUIRE(written.ok());
  CHECK(copies == 3);
  // Both writers' changes are kept: nothing the other wrote was lost.
  CHECK(written->spec().metadata().at("mine") == "yes");
  CHECK(written->spec().metadata().at("other") == "writer");
}

TEST_CASE("a run that changes all the time is refused, not retried forever") {
  Fixture f;
  const v1::Run created = f.Create("busy", "alice");
  f.runs->races = 1000;
  int copies = 0;
  auto written = f.writer.Mutate(created.id(), f.Tag(&copies));
  CHECK(absl::IsAborted(written.status()));
  CHECK(absl::StrContains(written.status().message(), "is changing too often; try again"));
  CHECK(copies == f.runs->updates);
  CHECK(copies < 1000);
}

TEST_CASE("a change that changes nothing writes nothing") {
  Fixture f;
  const v1::Run created = f.Create("quiet", "alice");
  auto same = f.writer.Mutate(created.id(), [](const v1::Run& r, const auto&) {
    return absl::StatusOr<Transition>(Transition{r, {}, {}, false});
  });
  REQUIRE(same.ok());
  CHECK(f.runs->updates == 0);
  CHECK(same->version() == created.version());
}

TEST_CASE("reads answer only what the caller may see, and changes only what they may change") {
  Fixture f;
  f.Create("alices", "alice");
  const auth::Principal alice{"alice", v1::ROLE_USER};
  const auth::Principal bob{"bob", v1::ROLE_USER};
  const auth::Principal operator_{"olga", v1::ROLE_OPERATOR};
  CHECK(f.writer.ReadVisible(alice, "alices").ok());
  // Another user's run is not found, as a run that does not exist: its name says nothing.
  CHECK(f.writer.ReadVisible(bob, "alices").status().message() == "run alices not found");
  CHECK(f.writer.ReadVisible(operator_, "alices").ok());
  const auto changed = f.writer.ReadChangeable(operator_, "alices");
  CHECK(absl::IsPermissionDenied(changed.status()));
  CHECK(absl::StrContains(changed.status().message(), "changes only their own"));
  CHECK(f.writer.ReadVisible(alice, "").status().message() == "name: required");
}

}  // namespace run_writer_test
}  // namespace tessera::runs
