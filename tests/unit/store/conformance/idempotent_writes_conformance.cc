// A call's idempotency record is written in the same transaction as the run write it makes.
#include <atomic>
#include <thread>
#include <vector>

#include "tests/unit/store/conformance/conformance.h"

namespace tessera::store::conformance {
namespace idempotent_writes_conformance {

IdempotentRunWrite WriteFor(const std::string& key) {
  return IdempotentRunWrite{IdempotencyKey{"SubmitRun/alice", key, "fingerprint-1", T(5)},
                            [](const v1::Run& run) { return "response for " + run.name(); }};
}

CONFORMANCE_CASE("idempotent writes: the record commits with the run and only once") {
  Stores s = FreshStores();
  auto created = s.runs->CreateRun(MakeRun("train-a", 1), {}, WriteFor("k1"));
  REQUIRE(created.ok());
  auto recorded = s.idempotency->Lookup("SubmitRun/alice", "k1");
  REQUIRE(recorded.ok());
  REQUIRE(recorded->has_value());
  CHECK((*recorded)->response == "response for train-a");
  CHECK((*recorded)->request_fingerprint == "fingerprint-1");

  // A second write with the key takes no effect at all.
  auto again = s.runs->CreateRun(MakeRun("train-b", 2), {}, WriteFor("k1"));
  CHECK(IsKeyTaken(again.status()));
  CHECK(absl::IsNotFound(s.runs->GetRun("train-b").status()));
  CHECK(s.runs->ListRuns({})->size() == 1);

  // A write that fails records nothing, so the call may be retried.
  auto stale = s.runs->UpdateRun(*created, /*expected_version=*/7, {}, {}, {}, WriteFor("k2"));
  CHECK(absl::IsAborted(stale.status()));
  CHECK(!s.idempotency->Lookup("SubmitRun/alice", "k2")->has_value());
  auto duplicate_name = s.runs->CreateRun(MakeRun("train-a", 3), {}, WriteFor("k3"));
  CHECK(absl::IsAlreadyExists(duplicate_name.status()));
  CHECK(!s.idempotency->Lookup("SubmitRun/alice", "k3")->has_value());

  // Updates and deletes record the run as they leave it.
  v1::Run changed = *created;
  changed.set_status(v1::RUN_STATUS_RUNNING);
  auto updated = s.runs->UpdateRun(changed, 1, {}, {}, {}, WriteFor("k4"));
  REQUIRE(updated.ok());
  CHECK((*s.idempotency->Lookup("SubmitRun/alice", "k4"))->response == "response for train-a");
  CHECK(IsKeyTaken(s.runs->UpdateRun(*updated, 2, {}, {}, {}, WriteFor("k4")).status()));
  CHECK(s.runs->GetRun("train-a")->version() == 2);
  REQUIRE(s.runs->DeleteRun(created->id(), WriteFor("k5")).ok());
  CHECK((*s.idempotency->Lookup("SubmitRun/alice", "k5"))->response == "response for train-a");
  CHECK(absl::IsNotFound(s.runs->DeleteRun("missing", WriteFor("k6"))));
  CHECK(!s.idempotency->Lookup("SubmitRun/alice", "k6")->has_value());
}

CONFORMANCE_CASE("idempotent writes: concurrent writes with one key act once") {
  Stores s = FreshStores();
  constexpr int kWriters = 8;
  std::atomic<int> succeeded{0}, taken{0}, other{0};
  std::vector<Stores> replicas;  // each writer as a separate replica would be
  for (int i = 0; i < kWriters; ++i) replicas.push_back(SameDatabaseStores());
  std::vector<std::thread> writers;
  for (int i = 0; i < kWriters; ++i) {
    writers.emplace_back([&, i] {
      auto r =
          replicas[i].runs->CreateRun(MakeRun("train-" + std::to_string(i), i), {}, WriteFor("k"));
      if (r.ok()) {
        ++succeeded;
      } else if (IsKeyTaken(r.status())) {
        ++taken;
      } else {
        ++other;
      }
    });
  }
  for (auto& t : writers) t.join();
  CHECK(succeeded == 1);
  CHECK(taken == kWriters - 1);
  CHECK(other == 0);
  auto runs = s.runs->ListRuns({});
  REQUIRE(runs->size() == 1);
  CHECK((*s.idempotency->Lookup("SubmitRun/alice", "k"))->response ==
        "response for " + (*runs)[0].name());
}

}  // namespace idempotent_writes_conformance
}  // namespace tessera::store::conformance
