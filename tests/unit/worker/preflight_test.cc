// The worker's pre-flight checks on real folders and real scripts (run as child processes), with
// the GPUs and the clock's measurement given by the test.
#include "worker/daemon/preflight.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "absl/strings/match.h"
#include "tests/support/temp_dir.h"

namespace tessera::worker {
namespace preflight_test {

GpuInventory Simulated(int n, const std::string& driver = "") {
  GpuInventory inv;
  for (int i = 0; i < n; ++i) {
    v1::Gpu g;
    g.set_index(i);
    g.set_uuid("GPU-" + std::to_string(i));
    inv.gpus.push_back(g);
  }
  inv.driver_version = driver;
  return inv;
}

v1::StartAttempt Start(std::vector<int> indices = {0, 1}, std::string driver = "",
                       double max_skew = 0) {
  v1::StartAttempt s;
  s.set_run_name("gpt-7");
  for (int i : indices) {
    s.add_gpu_indices(i);
    s.mutable_preflight()->add_gpu_uuids("GPU-" + std::to_string(i));
  }
  s.mutable_preflight()->set_driver_version(driver);
  s.mutable_preflight()->set_max_clock_skew_seconds(max_skew);
  return s;
}

struct Fixture {
  testing::TempDir tmp{"preflight_test"};
  GpuInventory gpus = Simulated(2);
  std::shared_ptr<FakeClock> wall = std::make_shared<FakeClock>();
  ClockSkew skew{wall};
  PreflightConfig config;

  Fixture() {
    std::filesystem::create_directories(tmp.path + "/state");
    std::filesystem::create_directories(tmp.path + "/shared");
    config.node_name = "n1";
    config.state_dir = tmp.path + "/state";
    config.shared_dir = tmp.path + "/shared";
    config.shm_dir = tmp.path;  // a folder with room, so the test does not depend on /dev/shm
    config.min_free_disk_bytes = 1 << 20;
    config.min_shm_bytes = 1 << 20;
  }
  std::vector<v1::PreflightCheck> Run(const v1::StartAttempt& start) {
    PreflightChecker checker(
        config, [this]() -> absl::StatusOr<GpuInventory> { return gpus; }, &skew,
        std::make_shared<image::ProcessToolRunner>(), std::make_shared<FakeClock>());
    return checker.Run(start);
  }
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = tmp.Write("scripts/" + name, "#!/bin/sh\n" + body + "\n");
    ::chmod(path.c_str(), 0755);
    return path;
  }
};

v1::PreflightCheck Named(const std::vector<v1::PreflightCheck>& checks, const std::string& name) {
  for (const auto& c : checks) {
    if (c.name() == name) return c;
  }
  FAIL("no check named " << name);
  return {};
}

TEST_CASE("a healthy node passes every check, each saying what it found") {
  Fixture f;
  const auto checks = f.Run(Start());
  CHECK(AllPassed(checks));
  std::vector<std::string> names;
  for (const auto& c : checks) names.push_back(c.name());
  CHECK(names == std::vector<std::string>{"gpus", "disk:" + f.config.state_dir,
                                          "disk:" + f.config.shared_dir, "shared-writable", "shm"});
  CHECK(Named(checks, "gpus").detail() ==
        "2 of 2 GPUs present with the UUIDs they registered with");
  CHECK(absl::StrContains(Named(checks, "shm").detail(), "1MiB required"));
  CHECK(absl::StrContains(Named(checks, "shared-writable").detail(), "written, synced, read back"));
  // The probe file is gone again.
  CHECK(std::filesystem::is_empty(f.config.shared_dir));
}

TEST_CASE("a GPU missing or replaced since the node registered fails the gpus check") {
  Fixture f;
  f.gpus = Simulated(1);
  auto c = Named(f.Run(Start()), "gpus");
  CHECK_FALSE(c.passed());
  CHECK(c.detail() == "GPU 1 (GPU-1) is missing: the node now has 1 GPU");
  f.gpus = Simulated(2);
  f.gpus.gpus[1].set_uuid("GPU-other");
  c = Named(f.Run(Start()), "gpus");
  CHECK_FALSE(c.passed());
  CHECK(c.detail() ==
        "GPU 1 is GPU-other, but registered as GPU-1 (a GPU was replaced or the devices "
        "renumbered)");
  CHECK(Named(f.Run(Start({})), "gpus").detail() == "no GPUs asked for");
}

TEST_CASE("a driver other than the cluster's fails, without a cluster version none is checked") {
  Fixture f;
  f.gpus = Simulated(2, "550.54");
  auto checks = f.Run(Start({0, 1}, "580.159.04"));
  CHECK_FALSE(AllPassed(checks));
  CHECK(Named(checks, "driver").detail() ==
        "driver 550.54, but the rest of the cluster runs 580.159.04");
  CHECK(Named(f.Run(Start({0, 1}, "550.54")), "driver").passed());
  for (const auto& c : f.Run(Start({0, 1}, ""))) CHECK(c.name() != "driver");
}

TEST_CASE("too little free disk or shared memory fails, with the figures") {
  Fixture f;
  f.config.min_free_disk_bytes = int64_t{1} << 50;  // a PiB: more than any test machine has
  auto checks = f.Run(Start());
  const auto& disk = Named(checks, "disk:" + f.config.state_dir);
  CHECK_FALSE(disk.passed());
  CHECK(absl::StrContains(disk.detail(), " free of "));
  CHECK(absl::StrContains(disk.detail(), "; 1024TiB required"));
  CHECK(Named(checks, "shm").passed());
  f.config.min_free_disk_bytes = 0;
  f.config.shm_dir = f.tmp.path + "/no-such-folder";
  const auto& shm = Named(f.Run(Start()), "shm");
  CHECK_FALSE(shm.passed());
  CHECK(absl::StrContains(shm.detail(), "cannot read " + f.config.shm_dir));
}

TEST_CASE("a shared folder that takes no file fails shared-writable") {
  Fixture f;
  f.config.shared_dir = "/proc";  // not even root can create a file there
  const auto& c = Named(f.Run(Start()), "shared-writable");
  CHECK_FALSE(c.passed());
  CHECK(absl::StartsWith(c.detail(), "cannot create a file in /proc: "));
}

TEST_CASE("the clock check uses the heartbeats' measurement, within its uncertainty") {
  Fixture f;
  // Not measured yet: passes, and says so.
  CHECK(Named(f.Run(Start({}, "", 10)), "clock").detail() ==
        "not measured yet (no heartbeat answered)");
  // A heartbeat answered 100 ms after it left; the control plane's time then was 30 s later
  // than this node's midpoint: this node is 30 s behind, to within 50 ms.
  f.skew.HeartbeatSent(7);
  const absl::Time sent = f.wall->Now();
  f.wall->Advance(absl::Milliseconds(100));
  f.skew.Answered(7, sent + absl::Milliseconds(50) + absl::Seconds(30));
  const auto estimate = f.skew.Latest();
  REQUIRE(estimate.has_value());
  CHECK(estimate->offset == absl::Seconds(30));
  CHECK(estimate->uncertainty == absl::Milliseconds(50));
  const auto& c = Named(f.Run(Start({}, "", 10)), "clock");
  CHECK_FALSE(c.passed());
  CHECK(c.detail() ==
        "the wall clock is 30.000 s behind the control plane's (+- 0.050 s); at most 10 s allowed");
  CHECK(Named(f.Run(Start({}, "", 30)), "clock").passed());  // within the bound's slack
  for (const auto& other : f.Run(Start({}, "", 0))) CHECK(other.name() != "clock");
  // An answer to a heartbeat never sent (or already answered) changes nothing.
  f.skew.Answered(7, sent);
  CHECK(f.skew.Latest()->offset == absl::Seconds(30));
}

TEST_CASE("operator scripts: a zero exit passes, others fail with their output, slow ones die") {
  Fixture f;
  f.config.scripts = {
      f.Script("ok.sh", "echo \"fine on $TESSERA_NODE_NAME for $TESSERA_RUN_NAME\""),
      f.Script("ib.sh", "echo 'mlx5_0: port down' >&2; exit 3"), f.Script("slow.sh", "sleep 5")};
  f.config.script_timeout = absl::Milliseconds(300);
  const auto checks = f.Run(Start());
  const auto& ok = Named(checks, "script:ok.sh");
  CHECK(ok.passed());
  CHECK(absl::StrContains(ok.detail(), "passed: fine on n1 for gpt-7"));
  const auto& ib = Named(checks, "script:ib.sh");
  CHECK_FALSE(ib.passed());
  CHECK(absl::StrContains(ib.detail(), "ib.sh exited with 3: mlx5_0: port down"));
  const auto& slow = Named(checks, "script:slow.sh");
  CHECK_FALSE(slow.passed());
  CHECK(absl::StrContains(slow.detail(), "slow.sh did not finish within 300ms: killed"));
}

TEST_CASE("pre-flight settings are checked, naming the flag") {
  Fixture f;
  CHECK(ValidatePreflightConfig(f.config).ok());
  f.config.scripts = {f.tmp.path + "/missing.sh"};
  CHECK(ValidatePreflightConfig(f.config).message() ==
        "--preflight-check: " + f.tmp.path + "/missing.sh is not a file");
  f.config.scripts = {f.tmp.Write("plain.sh", "exit 0\n")};
  ::chmod(f.config.scripts[0].c_str(), 0644);
  CHECK(absl::StrContains(ValidatePreflightConfig(f.config).message(), "is not executable"));
  f.config.scripts.clear();
  f.config.min_shm_bytes = -1;
  CHECK(ValidatePreflightConfig(f.config).message() == "--preflight-min-shm: must not be negative");
}

}  // namespace preflight_test
}  // namespace tessera::worker
