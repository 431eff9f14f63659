#include "worker/daemon/finish_gate.h"

#include <catch2/catch.hpp>
#include <set>

namespace tessera::worker {
namespace finish_gate_test {

const absl::Time kEnded = absl::FromUnixSeconds(1'000'000);

v1::AttemptUpdate Finished(const std::string& run_id, int resumption) {
  v1::AttemptUpdate u;
  u.set_run_id(run_id);
  u.set_resumption_index(resumption);
  u.set_phase(v1::ATTEMPT_PHASE_FINISHED);
  return u;
}

RankOutput Output(const std::string& run_id, int rank) {
  RankOutput out;
  out.run_id = run_id;
  out.rank = rank;
  out.stdout_path = "/spool/" + run_id + "/" + std::to_string(rank);
  return out;
}

// The ranks' outputs the log service has all of, by stdout path.
struct Shipped {
  std::set<std::string> paths;
  std::function<bool(const RankOutput&)> Predicate() {
    return [this](const RankOutput& out) { return paths.count(out.stdout_path) > 0; };
  }
};

TEST_CASE("an attempt's FINISHED is held until every rank's output is shipped") {
  Shipped shipped;
  FinishGate gate(shipped.Predicate(), absl::Seconds(5));
  REQUIRE(gate.holds_updates());
  gate.Hold(Finished("run-a", 0), {Output("run-a", 0), Output("run-a", 1)}, kEnded);
  CHECK(gate.Holds("run-a", 0));
  CHECK_FALSE(gate.Holds("run-a", 1));

  CHECK(gate.Release(kEnded + absl::Seconds(1)).empty());
  shipped.paths.insert(Output("run-a", 0).stdout_path);
  CHECK(gate.Release(kEnded + absl::Seconds(2)).empty());
  CHECK(gate.Holds("run-a", 0));

  shipped.paths.insert(Output("run-a", 1).stdout_path);
  const auto released = gate.Release(kEnded + absl::Seconds(3));
  REQUIRE(released.size() == 1);
  CHECK(released[0].run_id() == "run-a");
  CHECK(released[0].phase() == v1::ATTEMPT_PHASE_FINISHED);
  CHECK_FALSE(gate.Holds("run-a", 0));
  CHECK(gate.Release(kEnded + absl::Seconds(4)).empty());  // released once
}

TEST_CASE("a FINISHED whose output is not shipped goes after exactly the longest wait") {
  Shipped shipped;
  FinishGate gate(shipped.Predicate(), absl::Seconds(5));
  gate.Hold(Finished("run-a", 2), {Output("run-a", 0)}, kEnded);
  CHECK(gate.Release(kEnded + absl::Seconds(5) - absl::Nanoseconds(1)).empty());
  const auto released = gate.Release(kEnded + absl::Seconds(5));
  REQUIRE(released.size() == 1);
  CHECK(released[0].resumption_index() == 2);
  CHECK_FALSE(gate.Holds("run-a", 2));
}

TEST_CASE("attempts held together are released each when its own output is shipped") {
  Shipped shipped;
  FinishGate gate(shipped.Predicate(), absl::Seconds(5));
  gate.Hold(Finished("run-a", 0), {Output("run-a", 0)}, kEnded);
  gate.Hold(Finished("run-b", 0), {Output("run-b", 0)}, kEnded + absl::Seconds(1));
  shipped.paths.insert(Output("run-b", 0).stdout_path);
  auto released = gate.Release(kEnded + absl::Seconds(2));
  REQUIRE(released.size() == 1);
  CHECK(released[0].run_id() == "run-b");
  CHECK(gate.Holds("run-a", 0));
  // run-a's wait ends 5 s after its own end, not run-b's.
  released = gate.Release(kEnded + absl::Seconds(5));
  REQUIRE(released.size() == 1);
  CHECK(released[0].run_id() == "run-a");
}

TEST_CASE("without a way to ask the log service nothing is held") {
  FinishGate gate(nullptr, absl::Seconds(5));
  CHECK_FALSE(gate.holds_updates());
}

}  // namespace finish_gate_test
}  // namespace tessera::worker
