// The attempt manager on real rank processes (shell commands) in a temporary state folder.
#include "worker/daemon/attempt_manager.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "tests/support/metric_values.h"
#include "tests/support/poll_until.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/worker/attempt_polling.h"

namespace tessera::worker {
namespace attempt_manager_test {
namespace fs = std::filesystem;

struct Fixture {
  testing::TempDir tmp{"attempt_manager_test"};  // removed after the manager is gone
  const std::string state = tmp.path;
  std::vector<RankOutput> watched, done;
  const std::string memory = tmp.path + "/memory";  // the node's memory for checkpoints
  std::unique_ptr<AttemptManager> manager;
  Fixture() { manager = New(); }
  std::unique_ptr<AttemptManager> New() {
    AttemptManagerOptions options;
    options.state_dir = state;
    options.node_name = "n1";
    options.memory_checkpoints = {memory, 1 << 20};
    return std::make_unique<AttemptManager>(
        options, SystemClock::Shared(), [this](const RankOutput& o) { watched.push_back(o); },
        [this](const RankOutput& o) { done.push_back(o); });
  }
  // Polls until an update with `phase` arrives; returns every update seen.
  std::vector<v1::AttemptUpdate> PollFor(v1::AttemptPhase phase, double seconds = 10) {
    return testing::PollUntilPhase(*manager, phase, absl::Seconds(seconds));
  }
};

v1::StartAttempt Start(const std::string& command, int ranks = 2) {
  v1::StartAttempt s;
  s.set_run_id("run-1");
  s.set_run_name("r");
  s.set_command(command);
  s.set_world_size(ranks);
  s.set_local_world_size(ranks);
  s.set_num_nodes(1);
  s.set_parameters_json(R"({"lr":0.1})");
  return s;
}

// A worker counter in the process-wide registry (0 before its first increment).
double WorkerCount(const std::string& name, const std::vector<std::string>& labels = {}) {
  return testing::MetricValue(metrics::Registry::Default(), name, labels).value_or(0);
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST_CASE("an attempt's ranks start, exit, and are reported with their exit codes") {
  Fixture f;
  const double starts = WorkerCount("tessera_worker_rank_starts_total");
  const double failed = WorkerCount("tessera_worker_rank_exits_total", {"failed"});
  REQUIRE(
      f.manager->Start(Start("echo \"hi $RANK\"; cat \"$PARAMETERS\"; exit $((RANK + 3))")).ok());
  REQUIRE(f.watched.size() == 2);
  auto updates = f.PollFor(v1::ATTEMPT_PHASE_FINISHED);
  CHECK(updates.front().phase() == v1::ATTEMPT_PHASE_STARTED);
  std::map<int, int> codes;
  for (const auto& u : updates) {
    for (const auto& e : u.rank_exits()) codes[e.rank()] = e.exit_code();
  }
  CHECK(codes == std::map<int, int>{{0, 3}, {1, 4}});
  CHECK(WorkerCount("tessera_worker_rank_starts_total") == starts + 2);
  CHECK(WorkerCount("tessera_worker_rank_exits_total", {"failed"}) == failed + 2);
  CHECK(f.done.size() == 2);
  CHECK(Read(f.watched[1].stdout_path) == "hi 1\n{\"lr\":0.1}");
  // A repeat of the same start (a resent command) starts nothing.
  REQUIRE(f.manager->Start(Start("exit 1")).ok());
  CHECK(f.manager->TakeUpdates().empty());
  auto local = f.manager->LocalAttempts();
  REQUIRE(local.size() == 1);
  CHECK(local[0].running_ranks_size() == 0);
  CHECK(local[0].exited_ranks_size() == 2);
  // The record is gone once every rank has exited: nothing to clean up after a restart.
  CHECK(fs::is_empty(f.state + "/attempts"));
}

TEST_CASE("a start that cannot work is reported as START_FAILED, and nothing runs") {
  Fixture f;
  v1::StartAttempt s = Start("sleep 100");
  (*s.mutable_env())["WORLD_SIZE"] = "9";
  CHECK_FALSE(f.manager->Start(s).ok());
  auto updates = f.manager->TakeUpdates();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].phase() == v1::ATTEMPT_PHASE_START_FAILED);
  CHECK(updates[0].detail().find("start_attempt.env.WORLD_SIZE") != std::string::npos);
  CHECK(f.manager->running_ranks() == 0);
}

TEST_CASE("stop terminates the ranks' groups, KillAll fences at once") {
  Fixture f;
  const double stopped = WorkerCount("tessera_worker_rank_exits_total", {"stopped"});
  REQUIRE(f.manager->Start(Start("sleep 100 & wait")).ok());
  CHECK(f.manager->running_ranks() == 2);
  f.manager->Stop("run-1", 0, absl::Seconds(5));
  auto updates = f.PollFor(v1::ATTEMPT_PHASE_FINISHED);
  for (const auto& u : updates) {
    for (const auto& e : u.rank_exits()) CHECK(e.signal() == SIGTERM);
  }
  CHECK(WorkerCount("tessera_worker_rank_exits_total", {"stopped"}) == stopped + 2);
  v1::StartAttempt second = Start("trap '' TERM; sleep 100 & wait");
  second.set_resumption_index(1);
  REQUIRE(f.manager->Start(second).ok());
  const absl::Time t = absl::Now();
  CHECK(f.manager->KillAll() == 2);
  CHECK(absl::Now() - t < absl::Seconds(2));
  CHECK(f.manager->running_ranks() == 0);
}

TEST_CASE("a new incarnation kills the ranks its predecessor recorded and reports them lost") {
  Fixture f;
  // A rank left behind by a crashed worker: its own group, recorded in the state folder.
  const pid_t orphan = ::fork();
  REQUIRE(orphan >= 0);
  if (orphan == 0) {
    ::setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", "sleep 100 & wait", nullptr);
    _exit(127);
  }
  ::setpgid(orphan, orphan);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  AttemptRecords records(f.state);
  AttemptRecord r{"run-9", "old", 3, 0, f.state + "/runs/run-9/attempt-3", {}};
  r.ranks.push_back({0, orphan, *ProcessStartTicks(orphan)});
  r.ranks.push_back({1, 999999, 1});  // long gone
  REQUIRE(records.Save(r).ok());

  CHECK(f.manager->CleanUpPreviousIncarnation() == 1);
  ::waitpid(orphan, nullptr, 0);  // this test is its parent
  CHECK(LiveGroupMembers(orphan).empty());
  auto updates = f.manager->TakeUpdates();
  REQUIRE(updates.size() == 1);
  CHECK(updates[0].phase() == v1::ATTEMPT_PHASE_LOST);
  CHECK(updates[0].resumption_index() == 3);
  REQUIRE(updates[0].rank_exits_size() == 2);
  CHECK(updates[0].rank_exits(0).signal() == SIGKILL);
  auto local = f.manager->LocalAttempts();
  REQUIRE(local.size() == 1);
  CHECK(local[0].lost());
  // Their output is still shipped.
  CHECK(f.watched.size() == 2);
  CHECK(f.done.size() == 2);
  CHECK(records.LoadAll(nullptr).empty());
}

TEST_CASE("a recycled pid is never signalled") {
  Fixture f;
  AttemptRecord r{"run-1", "r", 0, 0, "", {{0, ::getpid(), 1}}};  // this test, wrong start time
  CHECK(KillRecordedRanks(r).empty());
}

}  // namespace attempt_manager_test
}  // namespace tessera::worker

namespace tessera::worker {
namespace attempt_manager_test {

TEST_CASE("a newer attempt of a run kills what is left of an older one on the node first") {
  Fixture f;
  REQUIRE(f.manager->Start(Start("trap '' TERM; sleep 100 & wait")).ok());
  CHECK(f.manager->running_ranks() == 2);
  v1::StartAttempt next = Start("sleep 100 & wait");
  next.set_resumption_index(1);
  REQUIRE(f.manager->Start(next).ok());
  // Only the new attempt's ranks run.
  CHECK(f.manager->running_ranks() == 2);
  auto local = f.manager->LocalAttempts();
  for (const auto& a : local) {
    if (a.resumption_index() == 0) CHECK(a.running_ranks_size() == 0);
    if (a.resumption_index() == 1) CHECK(a.running_ranks_size() == 2);
  }
}

// An attempt's FINISHED waits for its ranks' output to reach the log service, within a bound.
struct ShippingFixture {
  testing::TempDir tmp{"attempt_manager_shipping_test"};
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::atomic<bool> shipped{false};
  std::vector<RankOutput> asked;  // the outputs whose shipping was asked about
  std::unique_ptr<AttemptManager> manager;
  ShippingFixture() {
    AttemptManagerOptions options;
    options.state_dir = tmp.path;
    options.node_name = "n1";
    options.output_shipped = [this](const RankOutput& o) {
      asked.push_back(o);
      return shipped.load();
    };
    options.finish_waits_for_logs = absl::Seconds(5);
    manager = std::make_unique<AttemptManager>(
        options, clock, [](const RankOutput&) {}, [](const RankOutput&) {});
  }
  // Polls (on real time: the ranks are real processes) until every rank has exited; returns the
  // updates seen meanwhile.
  std::vector<v1::AttemptUpdate> PollUntilExited() {
    std::vector<v1::AttemptUpdate> seen;
    const bool exited = testing::PollUntil(
        [&] {
          manager->Poll();
          for (auto& u : manager->TakeUpdates()) seen.push_back(u);
          auto local = manager->LocalAttempts();
          return local.size() == 1 && local[0].running_ranks_size() == 0 &&
                 local[0].exited_ranks_size() == 2;
        },
        absl::Seconds(10), absl::Milliseconds(10));
    if (!exited) FAIL("the ranks did not exit");
    return seen;
  }
  // Every rank's exit code in `updates`: the ranks may exit in different polls, so that the
  // first exits go in RANK_EXITED updates and the last in FINISHED.
  static std::map<int, int> ExitCodes(const std::vector<v1::AttemptUpdate>& updates) {
    std::map<int, int> codes;
    for (const auto& u : updates) {
      for (const auto& e : u.rank_exits()) codes[e.rank()] = e.exit_code();
    }
    return codes;
  }
  static bool Finished(const std::vector<v1::AttemptUpdate>& updates) {
    for (const auto& u : updates) {
      if (u.phase() == v1::ATTEMPT_PHASE_FINISHED) return true;
    }
    return false;
  }
};

TEST_CASE(
    "a run's memory checkpoints stay on the node while it may resume, and go once it trained to "
    "its end") {
  Fixture f;
  // The first attempt keeps a snapshot in the folder it is given, and fails.
  REQUIRE(f.manager
              ->Start(Start("test \"$TESSERA_MEMORY_CHECKPOINT_BYTES\" = 1048576 && "
                            "echo $RANK > \"$TESSERA_MEMORY_CHECKPOINT_DIR/snapshot-$RANK\" && "
                            "exit 3"))
              .ok());
  f.PollFor(v1::ATTEMPT_PHASE_FINISHED);
  CHECK(Read(f.memory + "/run-1/snapshot-0") == "0\n");
  CHECK(Read(f.memory + "/run-1/snapshot-1") == "1\n");
  // The next finds it there and trains to the end: the folder goes.
  v1::StartAttempt next =
      Start("test -f \"$TESSERA_MEMORY_CHECKPOINT_DIR/snapshot-$RANK\" || exit 4");
  next.set_resumption_index(1);
  REQUIRE(f.manager->Start(next).ok());
  std::map<int, int> codes;
  for (const auto& u : f.PollFor(v1::ATTEMPT_PHASE_FINISHED)) {
    for (const auto& e : u.rank_exits()) codes[e.rank()] = e.exit_code();
  }
  CHECK(codes == std::map<int, int>{{0, 0}, {1, 0}});
  CHECK_FALSE(fs::exists(f.memory + "/run-1"));
}

TEST_CASE("an attempt is reported finished once its ranks' output is shipped, not before") {
  ShippingFixture f;
  REQUIRE(f.manager->Start(Start("echo \"last words of $RANK\"; exit $RANK")).ok());
  auto updates = f.PollUntilExited();
  f.manager->Poll();
  for (auto& u : f.manager->TakeUpdates()) updates.push_back(u);
  CHECK_FALSE(ShippingFixture::Finished(updates));
  // Heartbeats say why the end is not reported yet: the scheduler must not take it as missed.
  auto local = f.manager->LocalAttempts();
  REQUIRE(local.size() == 1);
  CHECK(local[0].logs_pending());

  f.shipped = true;
  f.asked.clear();
  f.manager->Poll();
  // Both ranks' files were asked about before the end was reported.
  std::set<int> ranks;
  for (const auto& o : f.asked) ranks.insert(o.rank);
  CHECK(ranks == std::set<int>{0, 1});
  const auto finished = f.manager->TakeUpdates();
  REQUIRE(finished.size() == 1);
  CHECK(finished[0].phase() == v1::ATTEMPT_PHASE_FINISHED);
  updates.insert(updates.end(), finished.begin(), finished.end());
  CHECK(ShippingFixture::ExitCodes(updates) == std::map<int, int>{{0, 0}, {1, 1}});
  CHECK_FALSE(f.manager->LocalAttempts()[0].logs_pending());
  // Reported once.
  f.manager->Poll();
  CHECK(f.manager->TakeUpdates().empty());
}

TEST_CASE("an attempt whose output cannot be shipped is reported finished after the wait") {
  ShippingFixture f;  // the log service never takes the lines
  REQUIRE(f.manager->Start(Start("echo unshipped")).ok());
  auto updates = f.PollUntilExited();
  f.clock->Advance(absl::Seconds(5) - absl::Milliseconds(1));
  f.manager->Poll();
  for (auto& u : f.manager->TakeUpdates()) updates.push_back(u);
  CHECK_FALSE(ShippingFixture::Finished(updates));
  f.clock->Advance(absl::Milliseconds(1));
  f.manager->Poll();
  const auto finished = f.manager->TakeUpdates();
  REQUIRE(finished.size() == 1);
  CHECK(finished[0].phase() == v1::ATTEMPT_PHASE_FINISHED);
  updates.insert(updates.end(), finished.begin(), finished.end());
  CHECK(ShippingFixture::ExitCodes(updates) == std::map<int, int>{{0, 0}, {1, 0}});
  CHECK_FALSE(f.manager->LocalAttempts()[0].logs_pending());
}

}  // namespace attempt_manager_test
}  // namespace tessera::worker
