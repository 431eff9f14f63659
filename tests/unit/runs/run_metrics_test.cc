// The run manager's progress history: what ReportProgress keeps, what GetRunMetrics shows and
// to whom, and the bound on a long attempt's points.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/timestamps.h"
#include "base/utf8.h"
#include "services/runs/progress_history.h"
#include "tests/support/metric_values.h"
#include "tests/unit/runs/run_manager_fixture.h"

namespace tessera::runs::testing {
namespace run_metrics_test {

TEST_CASE("the stride doubles with the attempt's steps and late reports are not kept") {
  CHECK(ProgressStride(0) == 1);
  CHECK(ProgressStride(kMaxProgressBuckets - 1) == 1);
  CHECK(ProgressStride(kMaxProgressBuckets) == 2);
  CHECK(ProgressStride(2 * kMaxProgressBuckets - 1) == 2);
  CHECK(ProgressStride(2 * kMaxProgressBuckets) == 4);
  CHECK(ProgressStride(1'000'000) == 512);

  CHECK_FALSE(KeepProgress(0, -1).has_value());
  CHECK_FALSE(KeepProgress(50, 49).has_value());  // a late report
  auto first = KeepProgress(0, 7);
  REQUIRE(first);
  CHECK(first->stride == 1);
  CHECK(first->thin_from == 0);
  auto same = KeepProgress(100, 100);  // a repeated report replaces its point
  REQUIRE(same);
  CHECK(same->thin_from == 100);
  // Within a stride only the previous report may need thinning; a wider stride thins all.
  auto next = KeepProgress(5000, 5003);
  REQUIRE(next);
  CHECK(next->stride == 4);
  CHECK(next->thin_from == 5000);
  auto wider = KeepProgress(kMaxProgressBuckets * 4 - 1, kMaxProgressBuckets * 4);
  REQUIRE(wider);
  CHECK(wider->stride == 8);
  CHECK(wider->thin_from == 0);
}

struct MetricsFixture : Fixture {
  v1::Run run = SubmitRetried();

  v1::Run SubmitRetried() {
    v1::SubmitRunRequest req;
    req.mutable_spec()->set_name("train");
    req.mutable_spec()->set_command("python train.py");
    req.mutable_spec()->mutable_compute()->set_gpus(8);
    req.mutable_spec()->mutable_scheduling()->set_retry_on_system_failure(true);
    v1::SubmitRunResponse resp;
    REQUIRE(manager.SubmitRun(alice, req, &resp).ok());
    return resp.run();
  }
  void Start(int index) {
    Record(run, index, v1::RUN_STATUS_QUEUED);
    Record(run, index, v1::RUN_STATUS_STARTING);
    Record(run, index, v1::RUN_STATUS_RUNNING);
  }
  absl::Status Report(int index, int64_t step, double loss) {
    v1::ReportProgressRequest req;
    req.set_run_id(run.id());
    req.set_resumption_index(index);
    req.mutable_progress()->set_step(step);
    req.mutable_progress()->set_total_steps(1'000'000);
    req.mutable_progress()->set_loss(loss);
    req.mutable_progress()->set_learning_rate(1e-4);
    req.mutable_progress()->set_tokens_per_second(5000);
    req.mutable_progress()->set_mfu(0.4);
    v1::ReportProgressResponse resp;
    return reports.ReportProgress(system, req, &resp);
  }
  absl::StatusOr<v1::GetRunMetricsResponse> Metrics(const auth::Principal& who,
                                                    std::optional<int> resumption = {}) {
    v1::GetRunMetricsRequest req;
    req.set_name(run.name());
    if (resumption) req.set_resumption_index(*resumption);
    v1::GetRunMetricsResponse resp;
    auto st = manager.GetRunMetrics(who, req, &resp);
    if (!st.ok()) return st;
    return resp;
  }
};

TEST_CASE("reports become the run's history with each resumption marked with its cause") {
  MetricsFixture f;
  f.Start(0);
  REQUIRE(f.Report(0, 10, 4.0).ok());
  f.clock->Advance(absl::Seconds(30));
  REQUIRE(f.Report(0, 20, 3.5).ok());
  REQUIRE(f.Report(0, 15, 9.9).ok());  // late: not kept
  f.Record(f.run, 0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  f.Start(1);
  REQUIRE(f.Report(1, 12, 3.6).ok());
  REQUIRE(f.Report(0, 21, 3.4).ok());  // from the attempt before: too late to count

  auto m = f.Metrics(f.alice);
  REQUIRE(m.ok());
  CHECK(m->run_name() == f.run.name());
  CHECK(m->total_steps() == 1'000'000);
  REQUIRE(m->points_size() == 3);
  CHECK(m->points(0).resumption_index() == 0);
  CHECK(m->points(0).step() == 10);
  CHECK(m->points(0).loss() == 4.0);
  CHECK(m->points(0).learning_rate() == 1e-4);
  CHECK(m->points(0).tokens_per_second() == 5000);
  CHECK(m->points(0).mfu() == 0.4);
  CHECK(m->points(1).step() == 20);
  CHECK(m->points(1).loss() == 3.5);
  CHECK(FromProtoTime(m->points(1).time()) - FromProtoTime(m->points(0).time()) ==
        absl::Seconds(30));
  CHECK(m->points(2).resumption_index() == 1);
  CHECK(m->points(2).step() == 12);
  REQUIRE(m->attempts_size() == 2);
  CHECK(m->attempts(0).end_reason() == v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK(m->attempts(1).resumption_index() == 1);

  auto second = f.Metrics(f.alice, 1);
  REQUIRE(second.ok());
  REQUIRE(second->points_size() == 1);
  CHECK(second->points(0).step() == 12);
  REQUIRE(second->attempts_size() == 1);
  CHECK(absl::IsNotFound(f.Metrics(f.alice, 7).status()));
}

TEST_CASE("a report keeps the time the scheduler stamped, never a later one than now") {
  MetricsFixture f;
  f.Start(0);
  const auto report = [&](int64_t step, absl::Time stamped) {
    v1::ReportProgressRequest req;
    req.set_run_id(f.run.id());
    req.mutable_progress()->set_step(step);
    *req.mutable_progress()->mutable_reported_at() = ToProtoTime(stamped);
    v1::ReportProgressResponse resp;
    REQUIRE(f.reports.ReportProgress(f.system, req, &resp).ok());
  };
  const absl::Time now = f.clock->Now();
  report(10, now - absl::Seconds(30));  // kept through an outage
  report(20, now + absl::Seconds(30));  // a clock ahead: now
  report(30, now - absl::Hours(48));    // implausible: now
  auto m = f.Metrics(f.alice);
  REQUIRE(m.ok());
  REQUIRE(m->points_size() == 3);
  CHECK(FromProtoTime(m->points(0).time()) == now - absl::Seconds(30));
  CHECK(FromProtoTime(m->points(1).time()) == now);
  CHECK(FromProtoTime(m->points(2).time()) == now);
}

TEST_CASE("a node's report of a step the attempt passed never moves the run's progress back") {
  MetricsFixture f;
  f.Start(0);
  REQUIRE(f.Report(0, 220, 3.0).ok());
  REQUIRE(f.Report(0, 210, 3.1).ok());  // another node's, sent a moment before
  v1::GetRunRequest get;
  get.set_name(f.run.name());
  v1::GetRunResponse got;
  REQUIRE(f.manager.GetRun(f.alice, get, &got).ok());
  CHECK(got.run().progress().step() == 220);
  CHECK(got.run().progress().loss() == 3.0);
  REQUIRE(f.Report(0, 230, 2.9).ok());
  REQUIRE(f.manager.GetRun(f.alice, get, &got).ok());
  CHECK(got.run().progress().step() == 230);
  // A new attempt starts again from its checkpoint's step: that is its progress.
  f.Record(f.run, 0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  f.Start(1);
  REQUIRE(f.Report(1, 200, 3.0).ok());
  REQUIRE(f.manager.GetRun(f.alice, get, &got).ok());
  CHECK(got.run().progress().step() == 200);
}

// The events of `run` of one type, in order.
std::vector<v1::RunEvent> EventsOf(MetricsFixture& f, v1::RunEventType type) {
  v1::DescribeRunRequest req;
  req.set_name(f.run.name());
  v1::DescribeRunResponse resp;
  REQUIRE(f.manager.DescribeRun(f.alice, req, &resp).ok());
  std::vector<v1::RunEvent> out;
  for (const auto& e : resp.description().events()) {
    if (e.type() == type) out.push_back(e);
  }
  return out;
}

TEST_CASE("each loss rollback the engine reports is one run event, whatever the step") {
  MetricsFixture f;
  f.Start(0);
  REQUIRE(f.Report(0, 24, 3.0).ok());
  // Rolled back at step 25 to the checkpoint of step 20: the next report is of step 21, and
  // every report after it carries the rollback.
  const auto rolled_back = [&](int index, int64_t step, int number, int64_t bad_step,
                               int64_t checkpoint_step, const std::string& reason) {
    v1::ReportProgressRequest req;
    req.set_run_id(f.run.id());
    req.set_resumption_index(index);
    req.mutable_progress()->set_step(step);
    req.mutable_progress()->set_loss(3.0);
    req.mutable_progress()->set_loss_rollbacks(number);
    auto* b = req.mutable_progress()->mutable_last_loss_rollback();
    b->set_number(number);
    b->set_max_rollbacks(3);
    b->set_bad_step(bad_step);
    b->set_checkpoint_step(checkpoint_step);
    b->set_reason(reason);
    v1::ReportProgressResponse resp;
    return f.reports.ReportProgress(f.system, req, &resp);
  };
  REQUIRE(rolled_back(0, 21, 1, 25, 20, "the loss is nan").ok());
  REQUIRE(rolled_back(0, 22, 1, 25, 20, "the loss is nan").ok());  // the same rollback again
  REQUIRE(rolled_back(0, 26, 1, 25, 20, "the loss is nan").ok());
  auto events = EventsOf(f, v1::RUN_EVENT_TYPE_LOSS_ROLLBACK);
  REQUIRE(events.size() == 1);
  CHECK(events[0].message() ==
        "Loss rollback 1 of 3: the loss is nan at step 25; training went back to the checkpoint "
        "of step 20 and skips that step's batch");
  CHECK(events[0].details().at("bad_step") == "25");
  CHECK(events[0].details().at("checkpoint_step") == "20");
  CHECK(events[0].resumption_index() == 0);
  v1::GetRunRequest get;
  get.set_name(f.run.name());
  v1::GetRunResponse got;
  REQUIRE(f.manager.GetRun(f.alice, get, &got).ok());
  CHECK(got.run().progress().step() == 26);
  CHECK(got.run().progress().loss_rollbacks() == 1);
  CHECK(got.run().progress().last_loss_rollback().bad_step() == 25);

  // A second one; then a resumed attempt from an older checkpoint counts from 0 again, and its
  // first rollback is news too. A late report of the first attempt's is not.
  REQUIRE(rolled_back(0, 31, 2, 40, 30, "the loss 9 is 5.00 x the median 1.8 of the last 10").ok());
  f.Record(f.run, 0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  f.Start(1);
  REQUIRE(f.Report(1, 21, 3.0).ok());  // knows of no rollback: the run's are kept
  REQUIRE(f.manager.GetRun(f.alice, get, &got).ok());
  CHECK(got.run().progress().loss_rollbacks() == 2);
  CHECK(got.run().progress().last_loss_rollback().number() == 2);
  REQUIRE(rolled_back(1, 23, 1, 27, 20, "the loss is inf").ok());
  REQUIRE(rolled_back(0, 45, 3, 50, 40, "the loss is nan").ok());  // too late: attempt 0 is over
  events = EventsOf(f, v1::RUN_EVENT_TYPE_LOSS_ROLLBACK);
  REQUIRE(events.size() == 3);
  CHECK(events[1].details().at("number") == "2");
  CHECK(events[2].resumption_index() == 1);
  CHECK(events[2].message().find("the loss is inf at step 27") != std::string::npos);

  // What a rank wrote is bounded and made valid UTF-8 before anyone reads it.
  REQUIRE(rolled_back(1, 24, 2, 28, 20, "\xff" + std::string(5000, 'x')).ok());
  events = EventsOf(f, v1::RUN_EVENT_TYPE_LOSS_ROLLBACK);
  REQUIRE(events.size() == 4);
  CHECK(events[3].details().at("reason") == "\uFFFD" + std::string(299, 'x'));
  CHECK(IsValidUtf8(events[3].message()));
}

TEST_CASE("a run's metrics are for its owner and for operators and Tessera to read") {
  MetricsFixture f;
  f.Start(0);
  REQUIRE(f.Report(0, 1, 2.0).ok());
  CHECK(absl::IsNotFound(f.Metrics(f.bob).status()));
  CHECK(f.Metrics(f.admin).ok());
  CHECK(f.Metrics(f.system).ok());
  CHECK(f.Metrics(f.alice).ok());
}

TEST_CASE("a million-step attempt keeps at most 2001 points spread evenly over all its steps") {
  MetricsFixture f;
  f.Start(0);
  // A report about every 97 steps, as a worker sends them (not aligned to any bucket).
  int64_t step = 0;
  for (; step <= 1'000'000; step += 97) REQUIRE(f.Report(0, step, 1.0).ok());
  const int64_t last = step - 97;
  auto m = f.Metrics(f.alice);
  REQUIRE(m.ok());
  const int n = m->points_size();
  CHECK(n <= kMaxProgressBuckets + 1);
  CHECK(n >= kMaxProgressBuckets / 2);
  CHECK(m->points(0).step() == 0);         // the first report
  CHECK(m->points(n - 1).step() == last);  // and the latest
  const int64_t stride = ProgressStride(last);
  int64_t widest = 0;
  for (int i = 1; i < n; ++i) {
    const int64_t a = m->points(i - 1).step(), b = m->points(i).step();
    REQUIRE(a < b);
    widest = std::max(widest, b - a);
    // Every point but the latest is the only one of its bucket.
    if (i < n - 1) CHECK(a / stride != b / stride);
  }
  CHECK(widest <= 2 * stride);
}

TEST_CASE("recoveries are counted by cause with their duration and ended runs by status") {
  using tessera::testing::HistogramPart;
  using tessera::testing::MetricValue;
  MetricsFixture f;
  f.Start(0);
  f.Record(f.run, 0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  CHECK_FALSE(MetricValue(f.registry, "tessera_run_recoveries_total", {"NODE_FAILURE"}));
  f.clock->Advance(absl::Seconds(30));
  f.Start(1);
  CHECK(MetricValue(f.registry, "tessera_run_recoveries_total", {"NODE_FAILURE"}) == 1);
  CHECK(MetricValue(f.registry, "tessera_run_recovery_seconds", {"NODE_FAILURE"}) == 1);
  CHECK(MetricValue(f.registry, "tessera_run_recovery_seconds", {"NODE_FAILURE"},
                    HistogramPart::kSum) == 30);
  // A repeated report of the same state is no second recovery.
  f.Record(f.run, 1, v1::RUN_STATUS_RUNNING);
  CHECK(MetricValue(f.registry, "tessera_run_recoveries_total", {"NODE_FAILURE"}) == 1);
  CHECK_FALSE(MetricValue(f.registry, "tessera_runs_ended_total", {"COMPLETED"}));
  f.Record(f.run, 1, v1::RUN_STATUS_COMPLETED, v1::ATTEMPT_END_REASON_SUCCEEDED);
  CHECK(MetricValue(f.registry, "tessera_runs_ended_total", {"COMPLETED"}) == 1);
  // repeated: counted once
  f.Record(f.run, 1, v1::RUN_STATUS_COMPLETED, v1::ATTEMPT_END_REASON_SUCCEEDED);
  CHECK(MetricValue(f.registry, "tessera_runs_ended_total", {"COMPLETED"}) == 1);
}

TEST_CASE("each running run has goodput and resumption gauges, dropped once it stops running") {
  using tessera::testing::MetricValue;
  MetricsFixture f;
  CHECK_FALSE(MetricValue(f.registry, "tessera_cluster_goodput_ratio", {}));  // not measured yet
  auto refreshed = f.upkeep.RefreshRunningRunMetrics();
  REQUIRE(refreshed.ok());
  CHECK(*refreshed == 0);  // queued: no series yet
  CHECK_FALSE(MetricValue(f.registry, "tessera_run_goodput_ratio", {f.run.name()}));
  CHECK_FALSE(MetricValue(f.registry, "tessera_cluster_goodput_ratio", {}));

  f.Start(0);
  f.clock->Advance(absl::Seconds(100));
  refreshed = f.upkeep.RefreshRunningRunMetrics();
  REQUIRE(refreshed.ok());
  CHECK(*refreshed == 1);
  // The same figure `mcli describe run` shows.
  v1::DescribeRunRequest req;
  req.set_name(f.run.name());
  v1::DescribeRunResponse described;
  REQUIRE(f.manager.DescribeRun(f.alice, req, &described).ok());
  const auto goodput = MetricValue(f.registry, "tessera_run_goodput_ratio", {f.run.name()});
  REQUIRE(goodput);
  CHECK(*goodput == described.description().goodput());
  CHECK(*goodput > 0);
  CHECK(MetricValue(f.registry, "tessera_run_resumptions", {f.run.name()}) == 0);
  // One running run: the cluster's ETTR is its goodput.
  CHECK(MetricValue(f.registry, "tessera_cluster_goodput_ratio", {}) == *goodput);

  // A node failure, then the run resumes: one resumption.
  f.Record(f.run, 0, v1::RUN_STATUS_FAILED, v1::ATTEMPT_END_REASON_NODE_FAILURE);
  f.clock->Advance(absl::Seconds(20));
  f.Start(1);
  f.clock->Advance(absl::Seconds(20));
  REQUIRE(f.upkeep.RefreshRunningRunMetrics().ok());
  CHECK(MetricValue(f.registry, "tessera_run_resumptions", {f.run.name()}) == 1);
  const auto after = MetricValue(f.registry, "tessera_run_goodput_ratio", {f.run.name()});
  REQUIRE(after);
  CHECK(*after < *goodput);  // the interruption's time is lost

  f.Record(f.run, 1, v1::RUN_STATUS_COMPLETED, v1::ATTEMPT_END_REASON_SUCCEEDED);
  REQUIRE(f.upkeep.RefreshRunningRunMetrics().ok());
  CHECK_FALSE(MetricValue(f.registry, "tessera_run_goodput_ratio", {f.run.name()}));
  CHECK_FALSE(MetricValue(f.registry, "tessera_run_resumptions", {f.run.name()}));
  CHECK_FALSE(MetricValue(f.registry, "tessera_cluster_goodput_ratio", {}));
}

}  // namespace run_metrics_test
}  // namespace tessera::runs::testing
