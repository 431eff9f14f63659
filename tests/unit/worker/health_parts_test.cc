// The worker's parts of the health loop: the process throttle on real processes, fault
// injection's rules, the canary command lines, NVML probing through a fake driver, and hang
// detection on real progress files.
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "tests/support/temp_dir.h"
#include "worker/daemon/canary_runner.h"
#include "worker/daemon/fault_injector.h"
#include "worker/daemon/process_throttle.h"
#include "worker/daemon/progress_watcher.h"
#include "worker/gpu/gpu_probe.h"
#include "worker/progress/progress_file.h"

namespace tessera::worker {
namespace health_parts_test {
namespace fs = std::filesystem;

// A child in its own process group that burns CPU until killed.
pid_t Spinner() {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    volatile unsigned long x = 0;
    for (;;) x = x + 1;
  }
  setpgid(pid, pid);
  return pid;
}

double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = s.rfind(')');
  std::istringstream rest(s.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15; ++i) {
    rest >> field;
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

char State(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  return s[s.rfind(')') + 2];
}

TEST_CASE("the throttle really slows a process group, stops it for a hang, and lets it go") {
  const pid_t free_pid = Spinner(), slow_pid = Spinner();
  {
    ProcessThrottle throttle([&] { return std::vector<pid_t>{slow_pid}; }, absl::Milliseconds(20));
    throttle.SetFactor(0.25);
    const double free0 = CpuSeconds(free_pid), slow0 = CpuSeconds(slow_pid);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const double free_used = CpuSeconds(free_pid) - free0, slow_used = CpuSeconds(slow_pid) - slow0;
    INFO("free " << free_used << " s, throttled " << slow_used << " s");
    // A quarter of the time when the thread that stops and continues it runs on time (about
    // 0.25 of the free one's here); on a core shared with other busy processes that thread is
    // woken late and the group runs longer (about 0.5 with one busy loop beside it on one core,
    // issue 40's slow machine). Unthrottled it would be 1: clearly less is what is asked.
    CHECK(slow_used < 0.75 * free_used);
    CHECK(slow_used > 0.05 * free_used);
    throttle.SetFactor(0);  // hang
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(State(slow_pid) == 'T');
    throttle.SetFactor(1);  // clear
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(State(slow_pid) != 'T');
    throttle.SetFactor(0);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }  // the destructor lets everything run again
  CHECK(State(slow_pid) != 'T');
  for (pid_t p : {free_pid, slow_pid}) {
    ::kill(-p, SIGKILL);
    waitpid(p, nullptr, 0);
  }
}

TEST_CASE("fault injection: refused without permission, XIDs only into simulated GPUs") {
  SimulatedGpuProbe gpus;
  ProcessThrottle throttle([] { return std::vector<pid_t>{}; });
  absl::Duration dropped = absl::ZeroDuration();
  std::optional<absl::Duration> link_down;
  FaultTargets targets{.simulated_gpus = &gpus,
                       .gpu_count = 2,
                       .throttle = &throttle,
                       .drop_network = [&](absl::Duration d) { dropped = d; },
                       .link_down = [&](absl::Duration d) { link_down = d; },
                       .crash = [] { FAIL("no crash in this test"); }};
  v1::InjectFault xid;
  xid.set_kind(v1::FAULT_KIND_XID);
  xid.set_gpu_index(1);
  CHECK(FaultInjector(false, "n1", targets).Inject(xid).code() ==
        absl::StatusCode::kFailedPrecondition);
  FaultInjector injector(true, "n1", targets);
  REQUIRE(injector.Inject(xid).ok());
  auto faults = gpus.Poll();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].kind() == v1::GPU_FAULT_KIND_XID);
  CHECK(faults[0].xid() == 79);
  CHECK(faults[0].injected());
  CHECK(faults[0].gpu_index() == 1);
  CHECK(gpus.Poll().empty());  // reported once
  xid.set_gpu_index(2);
  CHECK(injector.Inject(xid).code() == absl::StatusCode::kInvalidArgument);
  v1::InjectFault slow;
  slow.set_kind(v1::FAULT_KIND_SLOW);
  slow.set_factor(1.5);
  CHECK(injector.Inject(slow).message().find("factor: a slow node keeps a fraction") == 0);
  slow.set_factor(0.3);
  REQUIRE(injector.Inject(slow).ok());
  CHECK(throttle.factor() == 0.3);
  v1::InjectFault clear;
  clear.set_kind(v1::FAULT_KIND_CLEAR);
  REQUIRE(injector.Inject(clear).ok());
  CHECK(throttle.factor() == 1.0);
  v1::InjectFault net;
  net.set_kind(v1::FAULT_KIND_NETDROP);
  REQUIRE(injector.Inject(net).ok());
  CHECK(dropped == absl::Seconds(30));
  // A link down for some seconds or until cleared; clear brings it up.
  v1::InjectFault link;
  link.set_kind(v1::FAULT_KIND_LINK_DOWN);
  link.set_seconds(12);
  REQUIRE(injector.Inject(link).ok());
  CHECK(link_down == absl::Seconds(12));
  link.set_seconds(0);
  REQUIRE(injector.Inject(link).ok());
  CHECK(link_down == absl::InfiniteDuration());
  REQUIRE(injector.Inject(clear).ok());
  CHECK(link_down == absl::ZeroDuration());
  link.set_seconds(-1);
  CHECK(injector.Inject(link).message() == "seconds: -1 is negative (0: until cleared)");
  FaultTargets no_canaries = targets;
  no_canaries.link_down = nullptr;
  CHECK(FaultInjector(true, "n1", no_canaries).Validate(link).code() ==
        absl::StatusCode::kFailedPrecondition);
  FaultTargets real = targets;
  real.simulated_gpus = nullptr;
  CHECK(FaultInjector(true, "n1", real).Validate(xid).code() ==
        absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("canary command lines, and bad requests refused before anything runs") {
  v1::StartCanary c;
  c.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
  c.add_group("a");
  c.add_group("b");
  c.set_rank(1);
  c.set_master_addr("10.0.0.1");
  c.set_master_port(39001);
  c.add_payload_bytes(1 << 20);
  c.add_payload_bytes(4 << 20);
  c.mutable_timeout()->set_seconds(20);
  auto args = CanaryRunner::Arguments(c);
  REQUIRE(args.ok());
  CHECK(*args == std::vector<std::string>{"allreduce", "--rank", "1", "--world", "2",
                                          "--master-addr", "10.0.0.1", "--master-port", "39001",
                                          "--timeout", "20", "--sizes", "1048576,4194304"});
  c.set_rendezvous_token("00c0ffee");
  args = CanaryRunner::Arguments(c);
  REQUIRE(args.ok());
  CHECK(args->size() == 15);
  CHECK((*args)[13] == "--token");
  CHECK((*args)[14] == "00c0ffee");
  c.set_rendezvous_token("00c0ffee --min-busbw 1e9");  // the token cannot add an argument
  CHECK(CanaryRunner::Arguments(c).status().message() ==
        "start_canary.rendezvous_token: must be 1 to 64 lowercase hex digits");
  c.set_rendezvous_token("");
  c.set_rank(2);
  CHECK(CanaryRunner::Arguments(c).status().message() ==
        "start_canary.rank: 2 is not in a group of 2");
  v1::StartCanary compute;
  compute.set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  compute.set_seconds(0.5);
  CHECK(*CanaryRunner::Arguments(compute) ==
        std::vector<std::string>{"compute", "--seconds", "0.5", "--timeout", "60"});
  compute.set_threads(1);  // simulated nodes sharing a machine: one core each
  CHECK(*CanaryRunner::Arguments(compute) == std::vector<std::string>{"compute", "--seconds", "0.5",
                                                                      "--timeout", "60",
                                                                      "--threads", "1"});
  compute.set_threads(-2);
  CHECK(CanaryRunner::Arguments(compute).status().message() ==
        "start_canary.threads: -2 must not be negative");
}

TEST_CASE("the NVML probe reports each fault once, as it appears") {
  unsigned long long ecc = 0, reasons = 0;
  bool remap_failure = false, lost = false;
  std::vector<std::pair<unsigned, unsigned long long>> xids;
  NvmlApi api;
  api.device_handle = [&](unsigned i, void** d) {
    *d = reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1));
    return lost && i == 1 ? kNvmlErrorGpuIsLost : 0;
  };
  api.uncorrected_ecc = [&](void*, unsigned long long* c) {
    *c = ecc;
    return 0;
  };
  api.remapped_rows = [&](void*, bool* p, bool* f) {
    *p = false;
    *f = remap_failure;
    return 0;
  };
  api.throttle_reasons = [&](void*, unsigned long long* r) {
    *r = reasons;
    return 0;
  };
  api.next_xid_event = [&](unsigned* dev, unsigned long long* xid) {
    if (xids.empty()) return 1;
    *dev = xids.front().first;
    *xid = xids.front().second;
    xids.erase(xids.begin());
    return 0;
  };
  NvmlGpuProbe probe(api, 2, "g1");
  CHECK(probe.Poll().empty());
  ecc = 2;
  xids.push_back({1, 48});
  auto faults = probe.Poll();
  REQUIRE(faults.size() == 3);  // ECC on both GPUs (the fake shares the count) and the XID
  CHECK(faults[0].kind() == v1::GPU_FAULT_KIND_ECC_UNCORRECTABLE);
  CHECK(faults[2].kind() == v1::GPU_FAULT_KIND_XID);
  CHECK(faults[2].xid() == 48);
  CHECK(faults[2].gpu_index() == 1);
  CHECK(probe.Poll().empty());
  reasons = kThrottleHwThermal;
  remap_failure = true;
  faults = probe.Poll();
  CHECK(faults.size() == 4);  // thermal and remap failure on each GPU
  CHECK(probe.Poll().empty());
  lost = true;
  faults = probe.Poll();
  REQUIRE(faults.size() == 1);
  CHECK(faults[0].kind() == v1::GPU_FAULT_KIND_FELL_OFF_BUS);
  CHECK(faults[0].gpu_index() == 1);
  CHECK(probe.Poll().empty());
}

TEST_CASE("a rank that stops reporting is hung, one waiting in a collective only later") {
  const testing::TempDir tmp("hang_test");
  auto clock = std::make_shared<FakeClock>();
  ProgressWatcher watcher(clock);
  auto rank = [&](int r) {
    RankOutput o;
    o.run_id = "run-h";
    o.resumption_index = 0;
    o.rank = r;
    o.progress_path = tmp.path + "/rank-" + std::to_string(r) + ".progress";
    o.hang_timeout = absl::Seconds(10);
    return o;
  };
  progress::ProgressReporter r0(rank(0).progress_path), r1(rank(1).progress_path);
  watcher.Watch(rank(0));
  watcher.Watch(rank(1));
  progress::ProgressRecord rec;
  rec.step = 7;
  r0.Report(rec);
  r1.Report(rec);
  watcher.Poll();
  r1.MarkWaiting(true);  // rank 1 waits for rank 0, which is stuck in its own work
  clock->Advance(absl::Seconds(9));
  CHECK(watcher.TakeHangs().empty());
  clock->Advance(absl::Seconds(2));
  auto hangs = watcher.TakeHangs();
  REQUIRE(hangs.size() == 1);
  CHECK(hangs[0].rank() == 0);
  CHECK_FALSE(hangs[0].in_collective());
  CHECK(hangs[0].last_step() == 7);
  CHECK(hangs[0].seconds_without_progress() == Approx(11));
  CHECK(watcher.TakeHangs().empty());  // once per attempt
}

TEST_CASE("when every rank waits in a collective, the hang is reported at twice the timeout") {
  const testing::TempDir tmp("hang_test");
  auto clock = std::make_shared<FakeClock>();
  ProgressWatcher watcher(clock);
  RankOutput o;
  o.run_id = "run-w";
  o.rank = 3;
  o.progress_path = tmp.path + "/rank-3.progress";
  o.hang_timeout = absl::Seconds(5);
  progress::ProgressReporter reporter(o.progress_path);
  watcher.Watch(o);
  progress::ProgressRecord rec;
  rec.step = 1;
  reporter.Report(rec);
  watcher.Poll();
  reporter.MarkWaiting(true);
  clock->Advance(absl::Seconds(6));
  CHECK(watcher.TakeHangs().empty());
  clock->Advance(absl::Seconds(5));
  auto hangs = watcher.TakeHangs();
  REQUIRE(hangs.size() == 1);
  CHECK(hangs[0].in_collective());
}

TEST_CASE(
    "a rank that said it is ready and finished no step within the timeout hung in its first "
    "step, whatever CPU it uses, and one waiting in a collective at twice the timeout") {
  const testing::TempDir tmp("ready_hang_test");
  auto clock = std::make_shared<FakeClock>();
  ProgressWatcher watcher(clock);
  RankOutput o;
  o.run_id = "run-r";
  o.rank = 0;
  o.progress_path = tmp.path + "/rank-0.progress";
  o.hang_timeout = absl::Seconds(10);
  progress::ProgressReporter reporter(o.progress_path);
  watcher.Watch(o);
  // Starting up (loading its checkpoint, meeting its peers): silence is no hang, however long.
  clock->Advance(absl::Minutes(5));
  CHECK(watcher.TakeHangs().empty());
  progress::ProgressRecord ready;
  ready.step = 36;
  ready.resumed_from_step = 36;
  ready.ready = true;
  reporter.Report(ready);
  CHECK(watcher.Poll().empty());  // no step's progress to pass on
  SECTION("spinning outside a collective (a GPU kernel that never returns)") {
    clock->Advance(absl::Seconds(9));
    CHECK(watcher.TakeHangs().empty());
    clock->Advance(absl::Seconds(2));
    auto hangs = watcher.TakeHangs();
    REQUIRE(hangs.size() == 1);
    CHECK(hangs[0].before_first_step());
    CHECK_FALSE(hangs[0].before_first_report());
    CHECK_FALSE(hangs[0].in_collective());
    CHECK(hangs[0].last_step() == 36);
    CHECK(hangs[0].seconds_without_progress() == Approx(11));
  }
  SECTION("in its first collective (a communicator that never forms)") {
    reporter.MarkWaiting(true);
    clock->Advance(absl::Seconds(11));
    CHECK(watcher.TakeHangs().empty());
    clock->Advance(absl::Seconds(10));
    auto hangs = watcher.TakeHangs();
    REQUIRE(hangs.size() == 1);
    CHECK(hangs[0].in_collective());
    CHECK(hangs[0].before_first_step());
  }
  SECTION("its first step done in time: a step like any other from then on") {
    clock->Advance(absl::Seconds(8));
    progress::ProgressRecord step;
    step.step = 37;
    reporter.Report(step);
    REQUIRE(watcher.Poll().size() == 1);
    clock->Advance(absl::Seconds(9));
    CHECK(watcher.TakeHangs().empty());
    clock->Advance(absl::Seconds(2));
    auto hangs = watcher.TakeHangs();
    REQUIRE(hangs.size() == 1);
    CHECK_FALSE(hangs[0].before_first_step());
    CHECK(hangs[0].last_step() == 37);
  }
}

// A rank that never reported, whose real process group is `pid`, watched with a 5 s timeout.
RankOutput SilentRank(const std::string& dir, pid_t pid) {
  RankOutput o;
  o.run_id = "run-s";
  o.resumption_index = 1;
  o.rank = 2;
  o.progress_path = dir + "/rank-2.progress";
  o.hang_timeout = absl::Seconds(5);
  o.pid = pid;
  return o;
}

// Waits until `pid` has used another clock tick of CPU (a loaded machine may take a while).
bool UsesCpu(pid_t pid) {
  const double before = CpuSeconds(pid);
  for (int i = 0; i < 6000; ++i) {
    if (CpuSeconds(pid) >= before + 0.02) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

void Reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGCONT);
  ::waitpid(pid, nullptr, 0);
}

TEST_CASE("a rank that never reported is hung only when it is stuck and uses no CPU") {
  const testing::TempDir tmp("silent_hang_test");
  auto clock = std::make_shared<FakeClock>();

  SECTION("waiting idle (starting up, or in a rendezvous) is never a hang") {
    const pid_t idle = fork();
    if (idle == 0) {
      setpgid(0, 0);
      pause();
      _exit(0);
    }
    setpgid(idle, idle);
    ProgressWatcher watcher(clock);
    watcher.Watch(SilentRank(tmp.path, idle));
    for (int i = 0; i < 10; ++i) {
      CHECK(watcher.TakeHangs().empty());
      clock->Advance(absl::Seconds(30));
    }
    Reap(idle);
  }

  SECTION("stopped with its CPU time still for the timeout: hung, reported once") {
    const pid_t spinner = Spinner();
    ProgressWatcher watcher(clock);
    watcher.Watch(SilentRank(tmp.path, spinner));
    CHECK(watcher.TakeHangs().empty());
    // Running, it uses CPU: whatever the clock says, the look that sees its time move resets.
    REQUIRE(UsesCpu(spinner));
    ::kill(spinner, SIGSTOP);
    REQUIRE(::waitpid(spinner, nullptr, WUNTRACED) == spinner);
    clock->Advance(absl::Seconds(60));
    CHECK(watcher.TakeHangs().empty());
    clock->Advance(absl::Seconds(4));
    CHECK(watcher.TakeHangs().empty());
    clock->Advance(absl::Seconds(1));
    auto hangs = watcher.TakeHangs();
    REQUIRE(hangs.size() == 1);
    CHECK(hangs[0].before_first_report());
    CHECK(hangs[0].run_id() == "run-s");
    CHECK(hangs[0].resumption_index() == 1);
    CHECK(hangs[0].rank() == 2);
    CHECK(hangs[0].last_step() == 0);
    CHECK_FALSE(hangs[0].in_collective());
    CHECK(hangs[0].seconds_without_progress() == Approx(65));
    clock->Advance(absl::Seconds(60));
    CHECK(watcher.TakeHangs().empty());  // once per attempt
    Reap(spinner);
  }

  SECTION("throttled (stopped part of the time) it still uses CPU: slow, not hung") {
    const pid_t spinner = Spinner();
    ProcessThrottle throttle([&] { return std::vector<pid_t>{spinner}; });
    throttle.SetFactor(0.3);
    ProgressWatcher watcher(clock);
    watcher.Watch(SilentRank(tmp.path, spinner));
    for (int i = 0; i < 5; ++i) {
      REQUIRE(UsesCpu(spinner));
      clock->Advance(absl::Seconds(10));
      CHECK(watcher.TakeHangs().empty());
    }
    throttle.SetFactor(1);
    Reap(spinner);
  }

  SECTION("a rank whose processes are gone is not a hang (its exit is reported)") {
    const pid_t spinner = Spinner();
    Reap(spinner);
    ProgressWatcher watcher(clock);
    watcher.Watch(SilentRank(tmp.path, spinner));
    clock->Advance(absl::Seconds(60));
    CHECK(watcher.TakeHangs().empty());
  }
}

}  // namespace health_parts_test
}  // namespace tessera::worker
