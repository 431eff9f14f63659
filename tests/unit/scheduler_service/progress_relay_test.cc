// ProgressRelay with a fake run manager and a fake clock: what an outage of the run manager (or
// its database) does to the workers' progress reports.
#include "scheduler/service/progress_relay.h"

#include <catch2/catch.hpp>

#include "base/timestamps.h"
#include "scheduler/service/attempt_control.h"
#include "tests/unit/scheduler_service/fake_scheduler_clients.h"

namespace tessera::scheduler {
namespace progress_relay_test {

struct Fixture {
  std::shared_ptr<ListedRuns> runs = std::make_shared<ListedRuns>();
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  ProgressRelay relay{
      runs, clock,
      ProgressRelayConfig{
          .retry_interval = absl::Seconds(1), .max_per_attempt = 8, .max_total = 12}};

  static v1::ProgressUpdate Update(const std::string& run, int attempt, int64_t step) {
    v1::ProgressUpdate u;
    u.set_run_id(run);
    u.set_resumption_index(attempt);
    u.mutable_progress()->set_step(step);
    return u;
  }
  std::vector<int64_t> Delivered(const std::string& run) const {
    std::vector<int64_t> steps;
    for (const auto& r : runs->progress) {
      if (r.run_id() == run) steps.push_back(r.progress().step());
    }
    return steps;
  }
};

TEST_CASE("reports made while the run manager is away are delivered in order once it is back") {
  Fixture f;
  REQUIRE(f.relay.Relay("node-a", Fixture::Update("r1", 0, 10)).ok());
  CHECK(f.runs->progress.at(0).node_name() == "node-a");
  // Stamped as it arrived, on the control plane's clock.
  CHECK(FromProtoTime(f.runs->progress.at(0).progress().reported_at()) == f.clock->Now());
  const absl::Time away_from = f.clock->Now();
  f.runs->progress_answer = absl::UnavailableError("database unavailable");
  for (int64_t step : {20, 30, 40}) {
    f.clock->Advance(absl::Seconds(1));
    CHECK(f.relay.Relay("node-a", Fixture::Update("r1", 0, step)).ok());  // kept: not an error
  }
  CHECK(f.relay.pending() == 3);
  CHECK(f.runs->progress_calls == 2);  // 30 and 40 queued behind 20, not sent
  CHECK(f.relay.RetryDue() == 0);      // tried: still away
  CHECK(f.runs->progress_calls == 3);  // the first kept one only: the rest waits
  CHECK(f.relay.RetryDue() == 0);      // within the interval: not tried
  CHECK(f.runs->progress_calls == 3);
  f.clock->Advance(absl::Seconds(1));
  CHECK(f.relay.RetryDue() == 0);
  CHECK(f.relay.pending() == 3);

  f.runs->progress_answer = absl::OkStatus();
  // A report made now waits behind the kept ones: the run manager sees the steps in order.
  CHECK(f.relay.Relay("node-a", Fixture::Update("r1", 0, 50)).ok());
  CHECK(f.Delivered("r1") == std::vector<int64_t>{10});
  CHECK(f.relay.RetryDue() == 0);  // the interval again
  f.clock->Advance(absl::Seconds(1));
  CHECK(f.relay.RetryDue() == 4);
  CHECK(f.Delivered("r1") == std::vector<int64_t>{10, 20, 30, 40, 50});
  CHECK(f.relay.pending() == 0);
  // Each kept its own time, not the time it was delivered.
  CHECK(FromProtoTime(f.runs->progress.at(2).progress().reported_at()) ==
        away_from + absl::Seconds(2));
  // Nothing kept: straight through again.
  CHECK(f.relay.Relay("node-a", Fixture::Update("r1", 0, 60)).ok());
  CHECK(f.Delivered("r1").back() == 60);
}

TEST_CASE("a report refused for good is the worker's error and is not kept") {
  Fixture f;
  f.runs->progress_answer = absl::PermissionDeniedError("node-b does not run r1");
  CHECK(absl::IsPermissionDenied(f.relay.Relay("node-b", Fixture::Update("r1", 0, 10))));
  CHECK(f.relay.pending() == 0);
  // One kept while away, then refused for good once back: dropped, and the queue moves on.
  f.runs->progress_answer = absl::UnavailableError("away");
  CHECK(f.relay.Relay("node-a", Fixture::Update("gone", 0, 10)).ok());
  CHECK(f.relay.Relay("node-a", Fixture::Update("r2", 0, 10)).ok());
  f.runs->progress_answer = absl::NotFoundError("run gone was deleted");
  f.clock->Advance(absl::Seconds(1));
  CHECK(f.relay.RetryDue() == 0);
  CHECK(f.relay.pending() == 0);
}

TEST_CASE("what is kept is bounded: each attempt's reports thinned, the first and newest kept") {
  Fixture f;
  f.runs->progress_answer = absl::UnavailableError("away");
  for (int64_t step = 1; step <= 20; ++step) {
    REQUIRE(f.relay.Relay("node-a", Fixture::Update("long", 0, step)).ok());
  }
  CHECK(f.relay.pending() <= 8);
  // Another attempt's reports fit until the total is reached; past it, a new attempt's are not
  // kept, and a kept attempt's are thinned instead of growing.
  for (int64_t step = 1; step <= 6; ++step) {
    REQUIRE(f.relay.Relay("node-b", Fixture::Update("other", 1, step)).ok());
  }
  REQUIRE(f.relay.Relay("node-c", Fixture::Update("third", 0, 1)).ok());
  CHECK(f.relay.pending() <= 12);

  f.runs->progress_answer = absl::OkStatus();
  f.clock->Advance(absl::Seconds(1));
  f.relay.RetryDue();
  const auto long_steps = f.Delivered("long");
  REQUIRE(long_steps.size() >= 3);
  CHECK(long_steps.front() == 1);
  CHECK(long_steps.back() == 20);
  CHECK(std::is_sorted(long_steps.begin(), long_steps.end()));
  const auto other_steps = f.Delivered("other");
  REQUIRE_FALSE(other_steps.empty());
  CHECK(other_steps.back() == 6);
  CHECK(f.Delivered("third").empty());  // over the total: not kept (logged)
  CHECK(f.relay.pending() == 0);
}

TEST_CASE("an attempt's kept reports go at once before its end, other attempts' wait their turn") {
  Fixture f;
  f.runs->progress_answer = absl::UnavailableError("database unavailable");
  for (int64_t step : {10, 20}) CHECK(f.relay.Relay("node-a", Fixture::Update("r1", 0, step)).ok());
  CHECK(f.relay.Relay("node-b", Fixture::Update("r2", 0, 5)).ok());
  CHECK(f.relay.pending() == 3);
  // Still away: the first transient failure, everything still kept.
  CHECK(absl::IsUnavailable(f.relay.DeliverKept("r1", 0)));
  CHECK(f.relay.pending() == 3);

  f.runs->progress_answer = absl::OkStatus();
  // No retry interval to wait for: the attempt is about to end.
  CHECK(f.relay.DeliverKept("r1", 0).ok());
  CHECK(f.Delivered("r1") == std::vector<int64_t>{10, 20});
  CHECK(f.Delivered("r2").empty());  // r2's go with the next retry
  CHECK(f.relay.pending() == 1);
  const int calls = f.runs->progress_calls;
  CHECK(f.relay.DeliverKept("r3", 0).ok());  // nothing kept: no call
  CHECK(f.runs->progress_calls == calls);
}

TEST_CASE("a run that ended while the run manager was away ends at its last reported step") {
  Fixture f;
  auto attempts = std::make_shared<AttemptTracker>(f.clock, absl::Seconds(13));
  auto relay = std::make_shared<ProgressRelay>(f.runs, f.clock);
  AttemptControl control(attempts, f.runs, std::make_shared<WorkerRegistry>(), SchedulerConfig{},
                         relay);
  v1::Run run;
  run.set_id("r1");
  f.runs->runs.push_back(run);
  f.runs->progress_answer = absl::UnavailableError("database unavailable");
  for (int64_t step : {2480, 2500}) {
    CHECK(relay->Relay("node-a", Fixture::Update("r1", 0, step)).ok());
  }
  f.runs->progress_answer = absl::OkStatus();
  // The database is back and the attempt's end comes in before the next retry of the reports.
  AttemptState state;
  state.finished = {"node-a"};
  REQUIRE(control
              .EndAttempt("r1", 0, state, v1::ATTEMPT_END_REASON_SUCCEEDED,
                          v1::DETECTION_METHOD_EXIT_CODE, "every rank exited 0")
              .ok());
  REQUIRE(f.runs->recorded.size() == 1);
  CHECK(f.runs->progress_at_record.at(0) == 2);  // both reports were in first
  CHECK(f.Delivered("r1") == std::vector<int64_t>{2480, 2500});
  CHECK(relay->pending() == 0);
}

}  // namespace progress_relay_test
}  // namespace tessera::scheduler
