// Idempotency keys make a retried or duplicated call act once, even when the first call's commit
// was in doubt or the duplicates ran at the same time.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "services/runs/runs.h"
#include "services/store/memory/memory_database.h"
#include "tests/unit/runs/forwarding_run_store.h"

namespace tessera::runs {
namespace run_manager_idempotency_test {

class AnyFit final : public FitChecker {
 public:
  absl::StatusOr<std::string> CheckFit(const v1::ComputeSpec&, const std::string&, bool) override {
    return std::string();
  }
};

// Commits every write, then (while `lose_replies` is set) reports the outcome unknown, as when the
// connection breaks during COMMIT.
class LostReplyRunStore final : public testing::ForwardingRunStore {
 public:
  using ForwardingRunStore::ForwardingRunStore;
  bool lose_replies = false;

  absl::StatusOr<v1::Run> CreateRun(const v1::Run& run, const std::vector<v1::RunEvent>& events,
                                    const std::optional<store::IdempotentRunWrite>& idem) override {
    return Lost(inner()->CreateRun(run, events, idem));
  }
  absl::StatusOr<v1::Run> UpdateRun(const v1::Run& run, int64_t expected_version,
                                    const std::vector<v1::RunEvent>& events,
                                    const std::vector<v1::Attempt>& attempts,
                                    const std::optional<store::WriteFence>& fence,
                                    const std::optional<store::IdempotentRunWrite>& idem) override {
    return Lost(inner()->UpdateRun(run, expected_version, events, attempts, fence, idem));
  }
  absl::Status DeleteRun(std::string_view id, const std::optional<store::IdempotentRunWrite>& idem,
                         std::optional<int64_t> expected_version) override {
    absl::Status st = inner()->DeleteRun(id, idem, expected_version);
    if (!st.ok() || !lose_replies) return st;
    return absl::UnavailableError("database connection lost while committing; outcome unknown");
  }

 private:
  absl::StatusOr<v1::Run> Lost(absl::StatusOr<v1::Run> result) {
    if (!result.ok() || !lose_replies) return result;
    return absl::UnavailableError("database connection lost while committing; outcome unknown");
  }
};

struct Fixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  store::Stores stores = store::MakeMemoryStores();
  std::shared_ptr<LostReplyRunStore> runs = std::make_shared<LostReplyRunStore>(stores.runs);
  Runs roles = MakeRuns(
      RunsDependencies{.runs = runs,
                       .idem = std::make_shared<IdempotentCalls>(stores.idempotency, clock),
                       .fit = std::make_shared<AnyFit>(),
                       .clock = clock,
                       .options = RunManagerOptions{.allow_host_image = true}});
  RunManager& manager = *roles.manager;
  auth::Principal alice{"alice", v1::ROLE_USER};

  static v1::SubmitRunRequest SubmitRequest(const std::string& key) {
    v1::SubmitRunRequest req;
    req.set_idempotency_key(key);
    req.mutable_spec()->set_name("train");
    req.mutable_spec()->set_command("python train.py");
    req.mutable_spec()->mutable_compute()->set_gpus(8);
    return req;
  }
  size_t RunCount() { return stores.runs->ListRuns({})->size(); }
};

TEST_CASE("a submit whose commit was in doubt, retried with its key, creates one run") {
  Fixture f;
  const auto req = Fixture::SubmitRequest("retry-1");
  v1::SubmitRunResponse first;
  f.runs->lose_replies = true;
  CHECK(absl::IsUnavailable(f.manager.SubmitRun(f.alice, req, &first)));
  REQUIRE(f.RunCount() == 1);  // it did commit
  f.runs->lose_replies = false;
  v1::SubmitRunResponse retried;
  REQUIRE(f.manager.SubmitRun(f.alice, req, &retried).ok());
  CHECK(f.RunCount() == 1);
  CHECK(retried.run().name() == f.stores.runs->ListRuns({})->front().name());
  CHECK(retried.run().status() == v1::RUN_STATUS_PENDING);
}

TEST_CASE("a stop whose commit was in doubt answers its retry as the first stop did") {
  Fixture f;
  v1::SubmitRunResponse submitted;
  REQUIRE(f.manager.SubmitRun(f.alice, Fixture::SubmitRequest(""), &submitted).ok());
  v1::StopRunRequest stop;
  stop.set_name(submitted.run().name());
  stop.set_reason("done");
  stop.set_idempotency_key("stop-1");
  v1::StopRunResponse first, retried;
  f.runs->lose_replies = true;
  CHECK(absl::IsUnavailable(f.manager.StopRun(f.alice, stop, &first)));
  f.runs->lose_replies = false;
  REQUIRE(f.manager.StopRun(f.alice, stop, &retried).ok());
  const v1::Run stored = *f.stores.runs->GetRun(submitted.run().name());
  CHECK(retried.run().version() == stored.version());
  CHECK(retried.run().status() == stored.status());
  CHECK(stored.version() == 2);  // one write, not two
}

TEST_CASE("concurrent submits with one key create one run and all get its answer") {
  Fixture f;
  constexpr int kCallers = 8;
  const auto req = Fixture::SubmitRequest("burst-1");
  std::vector<v1::SubmitRunResponse> answers(kCallers);
  std::vector<absl::Status> statuses(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] { statuses[i] = f.manager.SubmitRun(f.alice, req, &answers[i]); });
  }
  for (auto& t : callers) t.join();
  CHECK(f.RunCount() == 1);
  const std::string name = f.stores.runs->ListRuns({})->front().name();
  for (int i = 0; i < kCallers; ++i) {
    CHECK(statuses[i].ok());
    CHECK(answers[i].run().name() == name);
  }
}

TEST_CASE("a key taken by another call with a different request is refused, acting not at all") {
  Fixture f;
  v1::SubmitRunResponse resp;
  REQUIRE(f.manager.SubmitRun(f.alice, Fixture::SubmitRequest("k"), &resp).ok());
  v1::CloneRunRequest clone;
  clone.set_name(resp.run().name());
  clone.set_idempotency_key("k");  // another method: its own scope, so it acts
  v1::CloneRunResponse cloned;
  REQUIRE(f.manager.CloneRun(f.alice, clone, &cloned).ok());
  CHECK(f.RunCount() == 2);
  auto other = Fixture::SubmitRequest("k");
  other.mutable_spec()->set_command("python other.py");
  auto st = f.manager.SubmitRun(f.alice, other, &resp);
  CHECK(absl::IsInvalidArgument(st));
  CHECK(st.message().find("different request") != std::string::npos);
  CHECK(f.RunCount() == 2);
}

}  // namespace run_manager_idempotency_test
}  // namespace tessera::runs
