// Rank limits written where a cgroup hierarchy says (a folder standing in for /sys/fs/cgroup).
#include "worker/sandbox/cgroup_limits.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "base/file_util.h"
#include "tests/support/temp_dir.h"

namespace tessera::worker::sandbox {
namespace cgroup_limits_test {

namespace fs = std::filesystem;
using testing::TempDir;

std::string Read(const fs::path& p) { return ReadWholeFile(p.string()).value_or("missing"); }

TEST_CASE("cgroup v1: memory and CPU limits in their own hierarchies", "[sandbox]") {
  TempDir root;
  fs::create_directories(root.path + "/memory");
  fs::create_directories(root.path + "/cpu");
  std::ofstream(root.path + "/memory/memory.limit_in_bytes") << "9223372036854771712";
  std::ofstream(root.path + "/cpu/cpu.cfs_quota_us") << "-1";
  const Cgroups c = Cgroups::Detect(root.path);
  REQUIRE(c.available());
  CHECK(std::string(c.version()) == "v1");
  auto procs = c.Create("run-1-0-rank-0", {.memory_bytes = 1 << 30, .cpus = 2.5});
  REQUIRE(procs.ok());
  const fs::path mem = fs::path(root.path) / "memory/tessera/run-1-0-rank-0";
  const fs::path cpu = fs::path(root.path) / "cpu/tessera/run-1-0-rank-0";
  CHECK(Read(mem / "memory.limit_in_bytes") == std::to_string(1 << 30));
  CHECK(Read(cpu / "cpu.cfs_period_us") == "100000");
  CHECK(Read(cpu / "cpu.cfs_quota_us") == "250000");
  CHECK(*procs ==
        std::vector<std::string>{(mem / "cgroup.procs").string(), (cpu / "cgroup.procs").string()});
  c.Remove("run-1-0-rank-0");  // rmdir fails on a real cgroup with files; here they are files
}

TEST_CASE("cgroup v2: one folder, memory.max and cpu.max", "[sandbox]") {
  TempDir root;
  std::ofstream(root.path + "/cgroup.controllers") << "cpuset cpu io memory pids";
  const Cgroups c = Cgroups::Detect(root.path);
  REQUIRE(c.available());
  CHECK(std::string(c.version()) == "v2");
  auto procs = c.Create("r", {.memory_bytes = 4096, .cpus = 1});
  REQUIRE(procs.ok());
  const fs::path dir = fs::path(root.path) / "tessera/r";
  CHECK(Read(dir / "memory.max") == "4096");
  CHECK(Read(dir / "cpu.max") == "100000 100000");
  CHECK(*procs == std::vector<std::string>{(dir / "cgroup.procs").string()});
}

TEST_CASE("processes are limited through the pids controller where there is one", "[sandbox]") {
  TempDir v1;
  for (const char* h : {"memory", "cpu", "pids"}) fs::create_directories(v1.path + "/" + h);
  std::ofstream(v1.path + "/memory/memory.limit_in_bytes") << "9223372036854771712";
  std::ofstream(v1.path + "/cpu/cpu.cfs_quota_us") << "-1";
  std::ofstream(v1.path + "/pids/cgroup.procs") << "";
  const Cgroups c1 = Cgroups::Detect(v1.path);
  REQUIRE(c1.limits_processes());
  auto procs = c1.Create("r", {.processes = 4096});
  REQUIRE(procs.ok());
  const fs::path pids = fs::path(v1.path) / "pids/tessera/r";
  CHECK(Read(pids / "pids.max") == "4096");
  CHECK(procs->back() == (pids / "cgroup.procs").string());  // the rank joins it too

  TempDir v2;
  std::ofstream(v2.path + "/cgroup.controllers") << "cpu memory pids";
  const Cgroups c2 = Cgroups::Detect(v2.path);
  REQUIRE(c2.limits_processes());
  REQUIRE(c2.Create("r", {.processes = 128}).ok());
  CHECK(Read(fs::path(v2.path) / "tessera/r/pids.max") == "128");

  // Without the controller the limit cannot hold, and the node can say so.
  TempDir no_pids;
  std::ofstream(no_pids.path + "/cgroup.controllers") << "cpu memory";
  const Cgroups c3 = Cgroups::Detect(no_pids.path);
  CHECK(c3.available());
  CHECK_FALSE(c3.limits_processes());
  REQUIRE(c3.Create("r", {.processes = 128}).ok());
  CHECK_FALSE(fs::exists(fs::path(no_pids.path) / "tessera/r/pids.max"));
}

TEST_CASE("no controllers: limits are not offered, and the node is told why", "[sandbox]") {
  TempDir root;
  const Cgroups none = Cgroups::Detect(root.path);
  CHECK_FALSE(none.available());
  CHECK(none.why_not() == "no cgroup memory and cpu controllers under " + root.path);
  CHECK(none.Create("r", {.memory_bytes = 1}).status().code() ==
        absl::StatusCode::kFailedPrecondition);
  TempDir v2;
  std::ofstream(v2.path + "/cgroup.controllers") << "pids io";
  CHECK(Cgroups::Detect(v2.path).why_not() == "cgroup v2 without the memory and cpu controllers");
}

}  // namespace cgroup_limits_test
}  // namespace tessera::worker::sandbox
