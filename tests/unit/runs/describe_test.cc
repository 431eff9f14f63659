// Describe as a pure function: what an interruption cost, in its parts, and goodput, from a run's
// attempts and its progress reports (a stopwatch's figures), or from the attempts alone.
#include "services/runs/describe.h"

#include <catch2/catch.hpp>
#include <optional>

#include "base/timestamps.h"
#include "services/runs/cluster_reliability.h"

namespace tessera::runs {
namespace describe_test {

const absl::Time kT0 = absl::FromUnixSeconds(1'700'000'000);

absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

v1::Attempt AttemptOf(int index, double started, std::optional<double> ended,
                      v1::AttemptEndReason reason, int64_t resumed_from, int64_t last_step) {
  v1::Attempt a;
  a.set_resumption_index(index);
  *a.mutable_started_at() = ToProtoTime(At(started));
  if (ended) *a.mutable_ended_at() = ToProtoTime(At(*ended));
  a.set_end_reason(reason);
  a.set_resumed_from_step(resumed_from);
  a.set_last_step(last_step);
  return a;
}

// Reports every 10 steps at 1 s a step, from `first` (at `time`) to `last`.
void Reports(std::vector<store::ProgressPoint>& out, int index, int64_t first, int64_t last,
             double time) {
  for (int64_t step = first; step <= last; step += 10) {
    store::ProgressPoint p;
    p.resumption_index = index;
    p.step = step;
    p.time = At(time + static_cast<double>(step - first));
    out.push_back(p);
  }
}

TEST_CASE("a fault costs from the last report before it to training back at that step") {
  // Created at 0, started at 10; reports at steps 10..100 (at 20 ... 110); the node died and the
  // attempt ended at 125 (15 s to notice); the next started at 130, trained from its checkpoint
  // (step 50) from 140 (10 s to start), its first report at step 60 (150), back at step 100 at
  // 190 (50 s of steps done again), and completed at step 200 at 290.
  v1::Run run;
  *run.mutable_created_at() = ToProtoTime(At(0));
  *run.mutable_ended_at() = ToProtoTime(At(290));
  std::vector<v1::Attempt> attempts = {
      AttemptOf(0, 10, 125, v1::ATTEMPT_END_REASON_NODE_FAILURE, 0, 100),
      AttemptOf(1, 130, 290, v1::ATTEMPT_END_REASON_SUCCEEDED, 50, 200)};
  std::vector<store::ProgressPoint> progress;
  Reports(progress, 0, 10, 100, 20);
  Reports(progress, 1, 60, 200, 150);

  const v1::RunDescription d = Describe(run, attempts, {}, progress, At(300));
  CHECK(d.step_seconds() == Approx(1.0));
  REQUIRE(d.interruptions_size() == 1);
  const v1::Interruption& it = d.interruptions(0);
  CHECK(it.detection_seconds() == Approx(15));
  CHECK(it.downtime_seconds() == Approx(5));
  CHECK(it.restart_seconds() == Approx(10));
  CHECK(it.rework_seconds() == Approx(50));
  CHECK(it.rework_steps() == 50);
  CHECK(it.seconds_lost() == Approx(80));
  CHECK_FALSE(it.ongoing());
  CHECK(d.seconds_lost_by_cause().at("NODE_FAILURE") == Approx(80));
  // 200 steps at 1 s a step over 290 s: what a stopwatch and the undisturbed pace say (the
  // 10 s before the first step and the 80 s lost are the rest).
  CHECK(d.run().effective_training_seconds() == Approx(200));
  CHECK(d.goodput() == Approx(200.0 / 290));
}

TEST_CASE("an interruption still being recovered from counts what it has cost so far") {
  v1::Run run;
  *run.mutable_created_at() = ToProtoTime(At(0));
  std::vector<v1::Attempt> attempts = {
      AttemptOf(0, 0, 100, v1::ATTEMPT_END_REASON_HANG, 0, 90),
      AttemptOf(1, 110, std::nullopt, v1::ATTEMPT_END_REASON_UNSPECIFIED, 50, 0)};
  std::vector<store::ProgressPoint> progress;
  Reports(progress, 0, 10, 90, 10);  // step 90 at 90: a 10 s hang before it ended
  SECTION("restarted, not yet training") {
    const v1::RunDescription d = Describe(run, attempts, {}, progress, At(130));
    REQUIRE(d.interruptions_size() == 1);
    CHECK(d.interruptions(0).detection_seconds() == Approx(10));
    CHECK(d.interruptions(0).downtime_seconds() == Approx(10));
    CHECK(d.interruptions(0).restart_seconds() == Approx(20));
    CHECK(d.interruptions(0).ongoing());
    CHECK(d.interruptions(0).seconds_lost() == Approx(40));
  }
  SECTION("training again, not yet back") {
    Reports(progress, 1, 60, 70, 125);  // trained from step 50 at 115
    const v1::RunDescription d = Describe(run, attempts, {}, progress, At(140));
    REQUIRE(d.interruptions_size() == 1);
    CHECK(d.interruptions(0).restart_seconds() == Approx(5));
    CHECK(d.interruptions(0).rework_seconds() == Approx(25));
    CHECK(d.interruptions(0).ongoing());
  }
  SECTION("waiting in the queue") {
    attempts[1].clear_started_at();
    const v1::RunDescription d = Describe(run, attempts, {}, progress, At(150));
    CHECK(d.interruptions(0).downtime_seconds() == Approx(50));
    CHECK(d.interruptions(0).ongoing());
  }
}

TEST_CASE("without progress reports the attempts' times are all there is") {
  v1::Run run;
  *run.mutable_created_at() = ToProtoTime(At(0));
  *run.mutable_ended_at() = ToProtoTime(At(400));
  std::vector<v1::Attempt> attempts = {
      AttemptOf(0, 0, 100, v1::ATTEMPT_END_REASON_PREEMPTED, 0, 100),
      AttemptOf(1, 120, 400, v1::ATTEMPT_END_REASON_SUCCEEDED, 50, 300)};
  const v1::RunDescription d = Describe(run, attempts, {}, {}, At(500));
  CHECK(d.step_seconds() == 0);
  REQUIRE(d.interruptions_size() == 1);
  // Half of attempt 0's steps were kept (checkpoint 50 of 100): 50 s redone, 20 s waited.
  CHECK(d.interruptions(0).rework_seconds() == Approx(50));
  CHECK(d.interruptions(0).downtime_seconds() == Approx(20));
  CHECK(d.interruptions(0).seconds_lost() == Approx(70));
  CHECK(d.seconds_lost_by_cause().at("PREEMPTED") == Approx(70));
  CHECK(d.run().effective_training_seconds() == Approx(50 + 280));
  CHECK(d.goodput() == Approx(330.0 / 400));
}

TEST_CASE("a slow stretch lowers goodput though nothing was interrupted") {
  v1::Run run;
  *run.mutable_created_at() = ToProtoTime(At(0));
  *run.mutable_ended_at() = ToProtoTime(At(200));
  std::vector<v1::Attempt> attempts = {
      AttemptOf(0, 0, 200, v1::ATTEMPT_END_REASON_SUCCEEDED, 0, 150)};
  std::vector<store::ProgressPoint> progress;
  Reports(progress, 0, 10, 100, 10);                   // 1 s a step to step 100 (at 100)
  for (int64_t step = 110; step <= 150; step += 10) {  // then 2 s a step: a slow node
    store::ProgressPoint p;
    p.resumption_index = 0;
    p.step = step;
    p.time = At(100 + 2.0 * static_cast<double>(step - 100));
    progress.push_back(p);
  }
  const v1::RunDescription d = Describe(run, attempts, {}, progress, At(300));
  CHECK(d.step_seconds() == Approx(1.0));
  CHECK(d.interruptions_size() == 0);
  CHECK(d.run().effective_training_seconds() == Approx(150));
  CHECK(d.goodput() == Approx(0.75));
}

}  // namespace describe_test
}  // namespace tessera::runs

namespace tessera::runs {
namespace describe_test {

v1::RunProgress Saving(int64_t interval_steps, double save_seconds) {
  v1::RunProgress p;
  p.set_checkpoint_interval_steps(interval_steps);
  p.set_checkpoint_save_seconds(save_seconds);
  return p;
}

TEST_CASE("the checkpoint interval advised is Young-Daly's at the cluster's interruption rate") {
  // 10 interruptions in 1,000 GPU-hours: one per 100 GPU-hours, for 8 GPUs one per 12.5 h.
  const ReliabilityFigures cluster{.interruptions = 10, .gpu_hours = 1000, .window_days = 7};
  auto a = AdviseCheckpointInterval(Saving(100, 1.0), 0.1, 8, cluster);
  REQUIRE(a.has_value());
  CHECK(a->mean_seconds_between_interruptions() == Approx(45000));
  CHECK(a->interval_seconds() == Approx(10));
  CHECK_FALSE(a->rate_is_bound());
  // sqrt(2 x 1 s x 45000 s) = 300 s, less the save, with Daly's small corrections.
  CHECK(a->advised_interval_seconds() == Approx(299.33).epsilon(0.001));
  CHECK(a->advised_interval_steps() == 2993);
  CHECK(a->expected_loss_now() == Approx(1.0 / 10 + 10.0 / 90000));
  CHECK(a->expected_loss_advised() == Approx(0.00667).epsilon(0.01));

  // No interruption seen: taken as one, and said to be a bound.
  auto none = AdviseCheckpointInterval(Saving(100, 1.0), 0.1, 8,
                                       {.interruptions = 0, .gpu_hours = 1000, .window_days = 7});
  REQUIRE(none.has_value());
  CHECK(none->rate_is_bound());
  CHECK(none->mean_seconds_between_interruptions() == Approx(450000));

  // A save dearer than twice the time between faults: once per fault.
  auto dear = AdviseCheckpointInterval(Saving(10, 100000), 1.0, 8, cluster);
  REQUIRE(dear.has_value());
  CHECK(dear->advised_interval_seconds() == Approx(45000));

  // Without what it needs, no advice.
  CHECK_FALSE(AdviseCheckpointInterval(Saving(0, 1.0), 0.1, 8, cluster).has_value());
  CHECK_FALSE(AdviseCheckpointInterval(Saving(100, 0), 0.1, 8, cluster).has_value());
  CHECK_FALSE(AdviseCheckpointInterval(Saving(100, 1.0), 0, 8, cluster).has_value());
  CHECK_FALSE(AdviseCheckpointInterval(Saving(100, 1.0), 0.1, 8,
                                       {.interruptions = 0, .gpu_hours = 0, .window_days = 7})
                  .has_value());
}

store::AttemptUsage Usage(int gpus, absl::Time started, absl::Time ended,
                          v1::AttemptEndReason reason) {
  store::AttemptUsage u;
  u.gpus = gpus;
  u.started_at = started;
  u.ended_at = ended;
  u.end_reason = reason;
  return u;
}

TEST_CASE("the cluster's interruptions are hardware faults per GPU-hour within the window") {
  const absl::Time since = At(0);
  const absl::Time until = At(10 * 3600);
  const ReliabilityFigures f = ReliabilityOf(
      {Usage(8, since - absl::Hours(1), since + absl::Hours(2),
             v1::ATTEMPT_END_REASON_NODE_FAILURE),  // 16 GPU-hours inside; a fault
       Usage(8, since, since + absl::Hours(1), v1::ATTEMPT_END_REASON_PREEMPTED),  // not hardware
       Usage(2, since, since + absl::Hours(1), v1::ATTEMPT_END_REASON_GPU_FAULT),
       Usage(4, until - absl::Hours(1), absl::InfiniteFuture(),
             v1::ATTEMPT_END_REASON_UNSPECIFIED)},  // still running
      since, until);
  CHECK(f.interruptions == 2);
  CHECK(f.gpu_hours == Approx(16 + 8 + 2 + 4));
  CHECK(f.window_days == Approx(10.0 / 24));
}

class CountingUsage final : public store::UsageStore {
 public:
  int reads = 0;
  absl::Status answer = absl::OkStatus();
  absl::StatusOr<std::vector<store::AttemptUsage>> ListAttemptUsage(absl::Time since,
                                                                    absl::Time) override {
    ++reads;
    if (!answer.ok()) return answer;
    return std::vector<store::AttemptUsage>{
        Usage(8, since, since + absl::Hours(1), v1::ATTEMPT_END_REASON_HANG)};
  }
};

TEST_CASE("the cluster's figures are read at most once a minute, and kept through an error") {
  auto usage = std::make_shared<CountingUsage>();
  auto clock = std::make_shared<FakeClock>(At(0));
  ClusterReliability reliability(usage, clock);
  auto first = reliability.Figures();
  REQUIRE(first.ok());
  CHECK(first->interruptions == 1);
  CHECK(first->gpu_hours == Approx(8));
  clock->Advance(absl::Seconds(59));
  REQUIRE(reliability.Figures().ok());
  CHECK(usage->reads == 1);
  clock->Advance(absl::Seconds(2));
  usage->answer = absl::UnavailableError("database away");
  auto kept = reliability.Figures();
  REQUIRE(kept.ok());  // the last figures, a minute older
  CHECK(kept->interruptions == 1);
  CHECK(usage->reads == 2);

  ClusterReliability fresh(usage, clock);
  CHECK(absl::IsUnavailable(fresh.Figures().status()));  // never answered: the error
  CHECK_FALSE(fresh.running_goodput().has_value());
  fresh.SetRunningGoodput(0.93);
  CHECK(fresh.running_goodput() == 0.93);
  fresh.SetRunningGoodput(std::nullopt);
  CHECK_FALSE(fresh.running_goodput().has_value());
}

}  // namespace describe_test
}  // namespace tessera::runs
