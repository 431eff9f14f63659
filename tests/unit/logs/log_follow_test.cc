// Following a run's logs: contiguous sequences only, gaps filled later, the end of the stream.
#include <atomic>
#include <functional>
#include <thread>

#include "proto/policy/packed_log_lines.h"
#include "tests/support/metric_values.h"
#include "tests/unit/logs/log_test_fixture.h"

namespace tessera::logs::testing {
namespace log_follow_test {

// GetLogs on a thread, collecting what it sends. A `gathering` follower sees lines only when
// the handler flushes them (as StreamLogs writes its batches).
class Follower {
 public:
  // `packed`: it also takes lines packed (as StreamLogs does for GetLogsRequest.packed).
  Follower(Fixture& f, v1::GetLogsRequest req, bool gathering = false, bool packed = false)
      : clock_(f.clock) {
    req.set_follow(true);
    thread_ = std::thread([this, &f, req, gathering, packed] {
      auto st = f.handler.GetLogs(
          f.alice, req,
          [this, gathering](const v1::LogLine& l) {
            absl::MutexLock lock(&mu_);
            (gathering ? gathered_ : texts_).push_back(l.text());
            return true;
          },
          [this] { return stop_.load(); },
          [this] {
            absl::MutexLock lock(&mu_);
            texts_.insert(texts_.end(), gathered_.begin(), gathered_.end());
            gathered_.clear();
            return true;
          },
          !packed ? PackedSink()
                  : [this](const v1::PackedLogLines&, absl::string_view lines, int64_t count) {
                      absl::MutexLock lock(&mu_);
                      ++packed_slices_;
                      int64_t seen = 0;
                      const absl::Status st = ForEachChunkLine(lines, [&](const ChunkLine& l) {
                        texts_.emplace_back(l.text);
                        ++seen;
                      });
                      return st.ok() && seen == count;
                    });
      absl::MutexLock lock(&mu_);
      status_ = st;
      ended_ = true;
    });
  }
  ~Follower() {
    stop_ = true;
    WaitForEnd();  // it sees stop_ once its wait on the clock ends
    thread_.join();
  }
  // Waits until `n` lines were sent (or 10 s of real time passed), moving time on meanwhile.
  Texts WaitFor(size_t n) {
    MoveTimeUntil([&] { return Now().size() >= n; });
    return Now();
  }
  Texts Now() {
    absl::MutexLock lock(&mu_);
    return texts_;
  }
  int packed_slices() {
    absl::MutexLock lock(&mu_);
    return packed_slices_;
  }
  // Waits until GetLogs returned, moving time on meanwhile; false if it did not within 10 s of
  // real time.
  bool WaitForEnd() {
    return MoveTimeUntil([&] {
      absl::MutexLock lock(&mu_);
      return ended_;
    });
  }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  // Moves time on by one poll interval once the follower waits on the clock; false if it did
  // not wait within 10 s of real time.
  bool MoveTimeOnce() {
    if (!clock_->AwaitWaiters(1, absl::Seconds(10))) return false;
    clock_->Advance(LogHandlerOptions().poll_interval);
    return true;
  }

 private:
  // Time passes for the follower as it would for a real one: each time it waits on the fake
  // clock (between polls of the store), the clock moves on by one poll interval.
  bool MoveTimeUntil(const std::function<bool()>& done) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (!done()) {
      if (absl::Now() > give_up) return false;
      if (clock_->AwaitWaiters(1, absl::Milliseconds(10))) {
        clock_->Advance(LogHandlerOptions().poll_interval);
      }
    }
    return true;
  }

  std::shared_ptr<FakeClock> clock_;
  absl::Mutex mu_;
  Texts texts_ ABSL_GUARDED_BY(mu_);
  Texts gathered_ ABSL_GUARDED_BY(mu_);
  int packed_slices_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

LogHandlerOptions PatientOptions() {
  LogHandlerOptions o;
  o.gap_timeout = absl::Hours(1'000'000);  // the clock moves on while the test waits for lines
  return o;
}

void End(Fixture& f, const std::string& name, v1::RunStatus status) {
  auto d = f.runs->Get(name);
  d.mutable_run()->set_status(status);
  *d.mutable_attempts(d.attempts_size() - 1)->mutable_ended_at() = ToProtoTime(f.clock->Now());
  f.runs->Set(d);
}

TEST_CASE("follow sends what is stored, then new lines, waiting for a gap to be filled") {
  Fixture f(PatientOptions());
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "a0"), f.Line(1, kOut, 0, 2, "b0")}).ok());
  Follower follower(f, Req());
  CHECK(follower.WaitFor(2) == Texts{"a0", "b0"});

  // a2 arrives before a1 (a1's batch has not committed yet): a2 waits, b1 does not.
  REQUIRE(f.Push({f.Line(0, kOut, 2, 5, "a2"), f.Line(1, kOut, 1, 6, "b1")}).ok());
  CHECK(follower.WaitFor(3) == Texts{"a0", "b0", "b1"});
  absl::SleepFor(absl::Milliseconds(100));
  CHECK(follower.Now().size() == 3);
  REQUIRE(f.Push({f.Line(0, kOut, 1, 4, "a1")}).ok());
  CHECK(follower.WaitFor(5) == Texts{"a0", "b0", "b1", "a1", "a2"});
  // A resent line is not sent again.
  REQUIRE(f.Push({f.Line(0, kOut, 1, 4, "a1"), f.Line(0, kErr, 0, 7, "e0")}).ok());
  CHECK(follower.WaitFor(6) == Texts{"a0", "b0", "b1", "a1", "a2", "e0"});

  End(f, "r", v1::RUN_STATUS_COMPLETED);
  REQUIRE(follower.WaitForEnd());
  CHECK(follower.status().ok());
  CHECK(follower.Now().size() == 6);
  // Each page sent while the attempt ran was timed, from its newest line's print time.
  const auto pages = tessera::testing::MetricValue(f.registry, "tessera_logs_follower_lag_seconds");
  REQUIRE(pages.has_value());
  CHECK(*pages >= 4);
}

TEST_CASE("a follower that gathers lines has them flushed before each wait") {
  Fixture f(PatientOptions());
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "a0"), f.Line(1, kOut, 0, 2, "b0")}).ok());
  Follower follower(f, Req(), /*gathering=*/true);
  CHECK(follower.WaitFor(2) == Texts{"a0", "b0"});
  // Behind a gap: what can be sent is flushed while the gap is awaited.
  REQUIRE(f.Push({f.Line(0, kOut, 2, 5, "a2"), f.Line(1, kOut, 1, 6, "b1")}).ok());
  CHECK(follower.WaitFor(3) == Texts{"a0", "b0", "b1"});
  REQUIRE(f.Push({f.Line(0, kOut, 1, 4, "a1")}).ok());
  CHECK(follower.WaitFor(5) == Texts{"a0", "b0", "b1", "a1", "a2"});
  End(f, "r", v1::RUN_STATUS_COMPLETED);
  REQUIRE(follower.WaitForEnd());
  CHECK(follower.Now().size() == 5);
}

TEST_CASE("a packed follower is handed packed lines as they came, from where it stands") {
  Fixture f(PatientOptions());
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.PushPacked({{f.Line(0, kOut, 0, 1, "a0")}}, "p1").ok());
  Follower follower(f, Req(), /*gathering=*/false, /*packed=*/true);
  CHECK(follower.WaitFor(1) == Texts{"a0"});  // read from the store: one by one
  // Caught up: the fan-out's packed lines go on packed. A resent group's lines already shown
  // are cut off; a group past a gap waits for it.
  REQUIRE(f.PushPacked({{f.Line(0, kOut, 0, 1, "a0"), f.Line(0, kOut, 1, 2, "a1"),
                         f.Line(0, kOut, 2, 3, "a2")},
                        {f.Line(1, kOut, 0, 3, "b0")}})
              .ok());
  CHECK(follower.WaitFor(4) == Texts{"a0", "a1", "a2", "b0"});
  CHECK(follower.packed_slices() >= 1);
  REQUIRE(f.PushPacked({{f.Line(0, kOut, 4, 5, "a4")}}).ok());
  absl::SleepFor(absl::Milliseconds(100));
  CHECK(follower.Now().size() == 4);
  REQUIRE(f.PushPacked({{f.Line(0, kOut, 3, 4, "a3")}}).ok());
  CHECK(follower.WaitFor(6) == Texts{"a0", "a1", "a2", "b0", "a3", "a4"});
  End(f, "r", v1::RUN_STATUS_COMPLETED);
  REQUIRE(follower.WaitForEnd());
  CHECK(follower.Now().size() == 6);
}

TEST_CASE("a packed follower with a line filter is sent only the lines that match") {
  Fixture f(PatientOptions());
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  v1::GetLogsRequest req = Req();
  req.set_grep("keep");
  Follower follower(f, req, /*gathering=*/false, /*packed=*/true);
  REQUIRE(f.PushPacked({{f.Line(0, kOut, 0, 1, "keep 0"), f.Line(0, kOut, 1, 2, "drop 1"),
                         f.Line(0, kOut, 2, 3, "keep 2")}})
              .ok());
  CHECK(follower.WaitFor(2) == Texts{"keep 0", "keep 2"});
  CHECK(follower.packed_slices() == 0);
  End(f, "r", v1::RUN_STATUS_COMPLETED);
  REQUIRE(follower.WaitForEnd());
  CHECK(follower.Now().size() == 2);
}

TEST_CASE("follow ends when a newer attempt starts, after the attempt's last lines") {
  Fixture f(PatientOptions());
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "a0")}).ok());
  Follower follower(f, Req());
  CHECK(follower.WaitFor(1) == Texts{"a0"});
  auto d = f.AddRun("r", v1::RUN_STATUS_QUEUED, 1);
  REQUIRE(follower.WaitForEnd());
  CHECK(follower.status().ok());
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "next attempt", 1)}).ok());
  CHECK(follower.Now() == Texts{"a0"});
}

TEST_CASE("lines still arriving after the attempt ended are all followed, then it ends") {
  Fixture f(PatientOptions());
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "a0")}).ok());
  Follower follower(f, Req());
  CHECK(follower.WaitFor(1) == Texts{"a0"});
  End(f, "r", v1::RUN_STATUS_COMPLETED);
  const absl::Time ended = f.clock->Now();
  // A worker shipping its backlog: a batch at each of the follower's waits, for longer than
  // end_grace after the end.
  Texts expected{"a0"};
  for (int i = 1; f.clock->Now() - ended <= 2 * LogHandlerOptions().end_grace; ++i) {
    REQUIRE(i < 100);
    expected.push_back("a" + std::to_string(i));
    REQUIRE(f.Push({f.Line(0, kOut, i, i + 1, expected.back())}, "b" + std::to_string(i)).ok());
    REQUIRE(follower.WaitFor(expected.size()) == expected);
    // WaitFor moves time only while no line came; a follower fed at once would never see
    // time pass, so each batch is followed by one poll interval.
    REQUIRE(follower.MoveTimeOnce());
  }
  REQUIRE(follower.WaitForEnd());
  CHECK(follower.status().ok());
  CHECK(follower.Now() == expected);
}

TEST_CASE("follow of an attempt that has ended sends what is stored and ends") {
  Fixture f(PatientOptions());
  auto d = f.AddRun("r", v1::RUN_STATUS_COMPLETED);
  *d.mutable_attempts(0)->mutable_ended_at() = ToProtoTime(f.clock->Now() - absl::Minutes(5));
  f.runs->Set(d);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "a0"), f.Line(0, kOut, 1, 2, "a1")}).ok());
  Follower follower(f, Req());
  REQUIRE(follower.WaitForEnd());
  CHECK(follower.status().ok());
  CHECK(follower.Now() == Texts{"a0", "a1"});
}

TEST_CASE(
    "follow with tail starts after the last lines, a gap that outlasts the timeout is skipped") {
  LogHandlerOptions o;
  o.gap_timeout = absl::Seconds(30);
  Fixture f(o);
  f.AddRun("r", v1::RUN_STATUS_RUNNING);
  REQUIRE(f.Push({f.Line(0, kOut, 0, 1, "a0"), f.Line(0, kOut, 1, 2, "a1"),
                  f.Line(1, kOut, 0, 3, "b0"), f.Line(1, kOut, 1, 4, "b1")})
              .ok());
  auto req = Req();
  req.set_tail(1);
  Follower follower(f, req);
  CHECK(follower.WaitFor(1) == Texts{"b1"});
  // Line a2 never comes: after the gap timeout a3 is shown anyway.
  REQUIRE(f.Push({f.Line(0, kOut, 3, 9, "a3"), f.Line(1, kOut, 2, 8, "b2")}).ok());
  CHECK(follower.WaitFor(3) == Texts{"b1", "b2", "a3"});
  End(f, "r", v1::RUN_STATUS_FAILED);
  REQUIRE(follower.WaitForEnd());
}

TEST_CASE("the follows of one run share the run manager's answer for half a check interval") {
  auto clock = std::make_shared<FakeClock>();
  auto runs = std::make_shared<FakeRuns>();
  v1::RunDescription d;
  d.mutable_run()->set_id("id-r");
  d.mutable_run()->set_name("r");
  d.mutable_run()->set_status(v1::RUN_STATUS_RUNNING);
  runs->Set(d);
  SharedRunLookup shared(runs, clock, absl::Milliseconds(500));
  for (int follow = 0; follow < 100; ++follow) REQUIRE(shared.DescribeRun("r").ok());
  CHECK(runs->calls() == 1);
  // A missing run's answer is shared as well.
  for (int follow = 0; follow < 10; ++follow) {
    CHECK(absl::IsNotFound(shared.DescribeRun("gone").status()));
  }
  CHECK(runs->calls() == 2);
  // Once the answer is half a check old, the next follow asks again and sees the run's end.
  d.mutable_run()->set_status(v1::RUN_STATUS_COMPLETED);
  runs->Set(d);
  clock->Advance(absl::Milliseconds(499));
  CHECK(shared.DescribeRun("r")->run().status() == v1::RUN_STATUS_RUNNING);
  clock->Advance(absl::Milliseconds(1));
  CHECK(shared.DescribeRun("r")->run().status() == v1::RUN_STATUS_COMPLETED);
  CHECK(runs->calls() == 3);
  // By id, every call asks.
  REQUIRE(shared.DescribeRunById("id-r").ok());
  REQUIRE(shared.DescribeRunById("id-r").ok());
  CHECK(runs->calls() == 5);
}

}  // namespace log_follow_test
}  // namespace tessera::logs::testing
