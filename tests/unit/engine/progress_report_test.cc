#include "worker/engine/train/progress_report.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"
#include "worker/engine/train/loss_rollback.h"

namespace tessera::engine {
namespace progress_report_test {
using tessera::testing::TempDir;

// The records a rank wrote, as the worker reads them: its steps' (`ready` too: the one before
// the first step as well).
std::vector<progress::ProgressRecord> Written(const std::string& path, bool ready = false) {
  std::vector<progress::ProgressRecord> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto r = progress::ProgressFromJsonLine(line);
    REQUIRE(r.ok());
    if (ready || !r->ready) records.push_back(*r);
  }
  return records;
}

StepResult Result(double loss, double compute_seconds) {
  StepResult r;
  r.loss = loss;
  r.learning_rate = 1e-3;
  r.compute_seconds = compute_seconds;
  return r;
}

struct Fixture {
  TempDir tmp{"progress-report"};
  std::string path = tmp.path + "/progress.jsonl";
  progress::ProgressReporter reporter{path};
  double now = 1000;
  ReportShape shape = [] {
    ReportShape s;
    s.total_steps = 10;
    s.tokens_per_step = 1024;
    s.log_interval = 5;
    s.flops_per_token = 1e6;
    s.peak_flops_per_rank = 1e9;
    s.world_size = 2;
    return s;
  }();
  ProgressReport report{&reporter, shape, [this] { return now; }};
};

TEST_CASE("a record is due each log_interval steps, at the last step and once a second") {
  Fixture f;
  f.report.Start(0);
  for (int64_t step = 1; step <= 10; ++step) {
    f.now += 0.25;
    const bool sent = f.report.StepDone(step, Result(3.0, 0.1), 0.25).has_value();
    // 0.25 s a step: a second has passed at step 4 and step 9; 5 and 10 are log steps.
    CHECK(sent == (step == 4 || step == 5 || step == 9 || step == 10));
  }
  const auto written = Written(f.path);
  REQUIRE(written.size() == 4);
  CHECK(written[0].step == 4);
  CHECK(written[3].step == 10);
  CHECK(written[3].total_steps == 10);
}

TEST_CASE("a ready record before the first step: where the run starts from, no step's figures") {
  Fixture f;
  f.report.SetResumedFrom(30);
  f.report.Start(30);
  f.now += 0.25;
  f.report.StepDone(31, Result(3.0, 0.1), 0.25);
  const auto written = Written(f.path, true);
  REQUIRE(written.size() == 1);  // step 31's is not due yet
  CHECK(written[0].ready);
  CHECK(written[0].step == 30);
  CHECK(written[0].resumed_from_step == 30);
  CHECK(written[0].checkpoint_step == 30);
  CHECK(written[0].time == Approx(1000));
  CHECK(written[0].loss == 0);
  CHECK(written[0].tokens_per_second == 0);
}

TEST_CASE("a record's rates are over the steps since the previous record") {
  Fixture f;
  f.report.Start(0);
  // Four fast steps, then one slow one: the slow window shows as slow.
  for (int64_t step = 1; step <= 4; ++step) {
    f.now += 0.1;
    f.report.StepDone(step, Result(3.0, 0.05), 0.1);
  }
  f.now += 2;
  auto slow = f.report.StepDone(5, Result(2.5, 1.5), 2.0);
  REQUIRE(slow.has_value());
  const auto first = Written(f.path).front();
  CHECK(first.step == 5);
  CHECK(first.tokens_per_second == Approx(5 * 1024 / 2.4));
  CHECK(first.compute_seconds == Approx((4 * 0.05 + 1.5) / 5));
  f.now += 1.5;
  auto next = f.report.StepDone(6, Result(2.4, 1.0), 1.5);
  REQUIRE(next.has_value());
  CHECK(next->tokens_per_second == Approx(1024 / 1.5));
  CHECK(next->compute_seconds == Approx(1.0));
  // MFU: 1e6 FLOPs a token over 2 ranks of 1e9 FLOP/s each.
  CHECK(next->mfu == Approx(1024 / 1.5 * 1e6 / 2e9));
  CHECK(next->loss == Approx(2.4));
  CHECK(next->time == Approx(f.now));
}

TEST_CASE("every record after a loss rollback carries it, and the next step's is due at once") {
  Fixture f;
  f.report.Start(0);
  f.report.SetCheckpointInterval(3);
  f.report.Saved(0.7);
  CHECK(f.report.StepDone(1, Result(3.0, 0.1), 0.1) == std::nullopt);
  progress::LossRollbackRecord rollback;
  rollback.number = 1;
  rollback.max = 3;
  rollback.bad_step = 2;
  rollback.checkpoint_step = 0;
  rollback.reason = "the loss is nan";
  f.report.RolledBack(rollback);
  f.now += 0.01;
  auto told = f.report.StepDone(1, Result(3.0, 0.1), 0.1);
  REQUIRE(told.has_value());
  CHECK(told->loss_rollbacks == 1);
  CHECK(told->last_rollback.number == 1);
  CHECK(told->last_rollback.reason == "the loss is nan");
  CHECK(told->checkpoint_interval_steps == 3);
  CHECK(told->checkpoint_save_seconds == Approx(0.7));
  f.now += 0.01;
  auto later = f.report.StepDone(5, Result(2.9, 0.1), 0.1);
  REQUIRE(later.has_value());
  CHECK(later->last_rollback.bad_step == 2);
  CHECK(Written(f.path).size() == 2);
}

TEST_CASE("every record says the newest committed checkpoint: the one resumed from, or later") {
  Fixture f;
  f.report.Start(0);
  f.report.SetResumedFrom(10);
  f.report.Committed(-1);  // nothing committed by this attempt yet
  f.now += 1.5;
  auto first = f.report.StepDone(11, Result(3.0, 0.1), 0.1);
  REQUIRE(first.has_value());
  CHECK(first->checkpoint_step == 10);
  f.report.Committed(20);
  f.now += 1.5;
  auto later = f.report.StepDone(21, Result(2.9, 0.1), 0.1);
  REQUIRE(later.has_value());
  CHECK(later->checkpoint_step == 20);
}

TEST_CASE("a run with nothing left to train says where it stands once") {
  Fixture f;
  f.report.SetResumedFrom(10);
  f.report.SetLossRollbacks(2);
  f.report.AlreadyDone(10);
  const auto written = Written(f.path);
  REQUIRE(written.size() == 1);
  CHECK(written[0].step == 10);
  CHECK(written[0].resumed_from_step == 10);
  CHECK(written[0].loss_rollbacks == 2);
  CHECK(written[0].time == Approx(1000));
}

TEST_CASE("the debug hooks' bad batch is bad wherever it is trained again, and no other is") {
  DebugBadBatches hooks(/*nan_step=*/3, /*spike_step=*/5);
  const DataState b1{0, 0}, b2{0, 8}, b3{0, 16}, b4{0, 24}, b5{0, 32};
  CHECK(hooks.HarmTo(1, b1) == DebugBadBatches::Harm::kNone);
  CHECK(hooks.HarmTo(2, b2) == DebugBadBatches::Harm::kNone);
  CHECK(hooks.HarmTo(3, b3) == DebugBadBatches::Harm::kNan);
  // Rolled back to step 2: step 3 now trains the next batch, and the NaN one again later.
  CHECK(hooks.HarmTo(3, b4) == DebugBadBatches::Harm::kNone);
  CHECK(hooks.HarmTo(4, b3) == DebugBadBatches::Harm::kNan);
  CHECK(hooks.HarmTo(5, b5) == DebugBadBatches::Harm::kSpike);
  CHECK(hooks.HarmTo(9, b5) == DebugBadBatches::Harm::kSpike);
  DebugBadBatches none(-1, -1);
  CHECK(none.HarmTo(3, b3) == DebugBadBatches::Harm::kNone);
}

}  // namespace progress_report_test
}  // namespace tessera::engine
