// The bubblewrap command line: what a rank's sandbox is made of, and what it is refused.
#include "worker/sandbox/sandbox_spec.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"
#include "worker/sandbox/gpu_devices.h"

namespace tessera::worker::sandbox {
namespace sandbox_spec_test {

using Kind = RootEntry::Kind;
using testing::TempDir;

// Whether `argv` holds the three words `a b c` in a row.
bool Has(const std::vector<std::string>& argv, const std::vector<std::string>& words) {
  return std::search(argv.begin(), argv.end(), words.begin(), words.end()) != argv.end();
}

SandboxSpec ImageSpec() {
  SandboxSpec s;
  s.init_path = "/opt/tessera/bin/tessera-sandbox-init";
  s.root = "/cache/bundles/abc/rootfs";
  s.root_entries = {{"bin", Kind::kSymlink, "usr/bin"}, {"dev", Kind::kDirectory, ""},
                    {"etc", Kind::kDirectory, ""},      {"proc", Kind::kDirectory, ""},
                    {"usr", Kind::kDirectory, ""},      {"run", Kind::kDirectory, ""},
                    {"sys", Kind::kDirectory, ""},      {"tmp", Kind::kDirectory, ""}};
  s.uid = 100001;
  s.gid = 100001;
  return s;
}

TEST_CASE("a sandbox has its own namespaces but the host's network, and the image read-only",
          "[sandbox]") {
  SandboxSpec s = ImageSpec();
  s.hidden = {"/var/lib/tessera-worker"};
  s.mounts = {{"/var/lib/tessera-worker/runs/r/attempt-0/work",
               "/var/lib/tessera-worker/runs/r/attempt-0/work", true, false}};
  s.shm_bytes = 1 << 30;
  s.tmp_bytes = 1 << 29;
  s.working_dir = "/var/lib/tessera-worker/runs/r/attempt-0/work";
  auto argv = BwrapArgv(s, {"/bin/sh", "-c", "echo hi"});
  REQUIRE(argv.ok());
  const auto& a = *argv;
  CHECK(a.front() == "/usr/bin/bwrap");
  for (const char* flag : {"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                           "--unshare-cgroup-try", "--share-net"}) {
    CHECK(std::find(a.begin(), a.end(), flag) != a.end());
  }
  CHECK(std::find(a.begin(), a.end(), "--unshare-net") == a.end());
  CHECK(Has(a, {"--uid", "100001", "--gid", "100001"}));
  CHECK(Has(a, {"--ro-bind", "/cache/bundles/abc/rootfs/usr", "/usr"}));
  CHECK(Has(a, {"--ro-bind", "/cache/bundles/abc/rootfs/etc", "/etc"}));
  CHECK(Has(a, {"--symlink", "usr/bin", "/bin"}));
  // The image's own /proc, /dev, /tmp, /sys and /run are never bound: the sandbox makes them.
  for (const char* owned : {"/proc", "/dev", "/tmp", "/sys", "/run"}) {
    CHECK_FALSE(Has(a, {"--ro-bind", std::string("/cache/bundles/abc/rootfs") + owned, owned}));
  }
  CHECK(Has(a, {"--proc", "/proc", "--dev", "/dev"}));
  CHECK(Has(a, {"--size", std::to_string(1 << 30), "--perms", "1777", "--tmpfs", "/dev/shm"}));
  CHECK(Has(a, {"--size", std::to_string(1 << 29), "--perms", "1777", "--tmpfs", "/tmp"}));
  CHECK(Has(a, {"--tmpfs", "/var/lib/tessera-worker"}));
  CHECK(Has(a, {"--bind", "/var/lib/tessera-worker/runs/r/attempt-0/work",
                "/var/lib/tessera-worker/runs/r/attempt-0/work"}));
  // The state folder is covered before the rank's own folders in it are bound back.
  const auto hide = std::find(a.begin(), a.end(), "/var/lib/tessera-worker");
  const auto bind = std::find(a.begin(), a.end(), "--bind");
  CHECK(hide < bind);
  CHECK(Has(a, {"--ro-bind", "/opt/tessera/bin/tessera-sandbox-init", kInitPath}));
  CHECK(Has(a, {"--chdir", "/var/lib/tessera-worker/runs/r/attempt-0/work"}));
  CHECK(Has(a, {kInitPath, "/bin/sh", "-c", "echo hi"}));
  CHECK(a.back() == "echo hi");
}

TEST_CASE("the host's root is bound entry by entry, never its /proc, /sys or /run", "[sandbox]") {
  SandboxSpec s = ImageSpec();
  s.root = "/";
  auto argv = BwrapArgv(s, {"true"});
  REQUIRE(argv.ok());
  CHECK(Has(*argv, {"--ro-bind", "/usr", "/usr"}));
  CHECK(Has(*argv, {"--ro-bind", "/etc", "/etc"}));
  CHECK_FALSE(Has(*argv, {"--ro-bind", "/sys", "/sys"}));
  CHECK_FALSE(Has(*argv, {"--ro-bind", "/run", "/run"}));
}

TEST_CASE("an opened folder of the root is rebuilt entry by entry, so a mount point can be made",
          "[sandbox]") {
  SandboxSpec s = ImageSpec();
  s.root_entries.push_back({"mnt", Kind::kDirectory, ""});
  s.opened_entries["mnt"] = {{"data", Kind::kDirectory, ""}, {"latest", Kind::kSymlink, "data"}};
  s.mounts.push_back({"/state/parameters.yaml", "/mnt/config/parameters.yaml", false, false});
  auto argv = BwrapArgv(s, {"true"});
  REQUIRE(argv.ok());
  CHECK(Has(*argv, {"--tmpfs", "/mnt"}));
  CHECK(Has(*argv, {"--ro-bind", "/cache/bundles/abc/rootfs/mnt/data", "/mnt/data"}));
  CHECK(Has(*argv, {"--symlink", "data", "/mnt/latest"}));
  CHECK_FALSE(Has(*argv, {"--ro-bind", "/cache/bundles/abc/rootfs/mnt", "/mnt"}));
  CHECK(Has(*argv, {"--ro-bind", "/state/parameters.yaml", "/mnt/config/parameters.yaml"}));
  // The folder's tmpfs comes before the file mounted in it.
  const auto at = [&](const std::string& word) {
    return std::find(argv->begin(), argv->end(), word) - argv->begin();
  };
  CHECK(at("/mnt") < at("/mnt/config/parameters.yaml"));
}

TEST_CASE("a sandbox with a bad path or no command is refused, naming what is wrong", "[sandbox]") {
  SandboxSpec s = ImageSpec();
  CHECK(BwrapArgv(s, {}).status().message() == "the sandboxed command is empty");
  s.mounts = {{"relative/dir", "/x", true, false}};
  CHECK(BwrapArgv(s, {"true"}).status().message() ==
        "mount source 'relative/dir' is not an absolute path");
  s.mounts = {{"/data", "/data/../etc", true, false}};
  CHECK(BwrapArgv(s, {"true"}).status().message() == "mount target '/data/../etc' contains '..'");
  s.mounts = {{"/data", "/proc", true, false}};
  CHECK(BwrapArgv(s, {"true"}).status().message() == "mount target '/proc' belongs to the sandbox");
  s.mounts = {};
  s.init_path = "init";
  CHECK(BwrapArgv(s, {"true"}).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a rank gets its own GPU's device node and the control nodes, no other GPU's",
          "[sandbox]") {
  TempDir dev;
  for (const char* name : {"nvidia0", "nvidia1", "nvidia2", "nvidiactl", "nvidia-uvm"}) {
    std::ofstream(dev.path + "/" + name) << "";
  }
  auto mounts = GpuDeviceMounts(dev.path, {1});
  std::vector<std::string> targets;
  for (const auto& m : mounts) {
    CHECK(m.device);
    targets.push_back(m.target);
  }
  CHECK(targets == std::vector<std::string>{"/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"});
  CHECK(mounts[0].source == dev.path + "/nvidia1");
  // A CPU rank sees no NVIDIA node at all.
  CHECK(GpuDeviceMounts(dev.path, {}).empty());
  // A GPU whose node is missing is not made up.
  CHECK(GpuDeviceMounts(dev.path, {7}).size() == 2);
}

TEST_CASE("MIG's capabilities, profiling and RDMA devices only where the run's GPUs need them",
          "[sandbox]") {
  TempDir dev, caps;
  for (const char* name :
       {"nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"}) {
    std::ofstream(dev.path + "/" + name) << "";
  }
  std::filesystem::create_directories(dev.path + "/nvidia-caps");
  std::filesystem::create_directories(dev.path + "/infiniband");
  auto targets = [&](const GpuDeviceNeeds& needs) {
    std::vector<std::string> out;
    for (const auto& m : GpuDeviceMounts(dev.path, {0}, needs)) out.push_back(m.target);
    return out;
  };
  // Never the display's node; the others only when needed.
  CHECK(targets({}) ==
        std::vector<std::string>{"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"});
  CHECK(targets({.mig = true, .profiling = true, .rdma = true}) ==
        std::vector<std::string>{"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm",
                                 "/dev/nvidia-uvm-tools", "/dev/nvidia-caps", "/dev/infiniband"});
  // MIG is on where the driver lists a GPU instance.
  std::filesystem::create_directories(caps.path + "/mig");
  std::filesystem::create_directories(caps.path + "/gpu0/mig");
  CHECK_FALSE(MigInstancesPresent(caps.path));
  std::filesystem::create_directories(caps.path + "/gpu0/mig/gi1/ci0");
  CHECK(MigInstancesPresent(caps.path));
  CHECK_FALSE(MigInstancesPresent(caps.path + "/missing"));
}

TEST_CASE("the driver's libraries and tools are found and bound where the toolkit puts them",
          "[sandbox]") {
  TempDir lib, bin;
  std::ofstream(lib.path + "/libcuda.so.535.104.05") << "x";
  std::filesystem::create_symlink("libcuda.so.535.104.05", lib.path + "/libcuda.so.1");
  std::ofstream(lib.path + "/libnvidia-ml.so.535.104.05") << "x";
  std::ofstream(lib.path + "/libz.so.1") << "x";
  std::ofstream(bin.path + "/nvidia-smi") << "x";
  std::ofstream(bin.path + "/ls") << "x";
  auto mounts = DriverMounts({lib.path}, {bin.path});
  std::vector<std::string> targets;
  for (const auto& m : mounts) {
    CHECK_FALSE(m.writable);
    targets.push_back(m.target);
  }
  CHECK(targets == std::vector<std::string>{"/usr/local/nvidia/bin/nvidia-smi",
                                            "/usr/local/nvidia/lib64/libcuda.so.1",
                                            "/usr/local/nvidia/lib64/libcuda.so.535.104.05",
                                            "/usr/local/nvidia/lib64/libnvidia-ml.so.535.104.05"});
  // A link is bound as the file it names.
  for (const auto& m : mounts) {
    if (m.target == "/usr/local/nvidia/lib64/libcuda.so.1") {
      CHECK(m.source == lib.path + "/libcuda.so.535.104.05");
    }
  }
}

TEST_CASE("a root's top-level entries are listed with their kinds", "[sandbox]") {
  TempDir root;
  std::filesystem::create_directory(root.path + "/usr");
  std::filesystem::create_symlink("usr/bin", root.path + "/bin");
  std::ofstream(root.path + "/.dockerenv") << "";
  auto entries = ListRootEntries(root.path);
  REQUIRE(entries.ok());
  REQUIRE(entries->size() == 3);
  CHECK((*entries)[0].name == ".dockerenv");
  CHECK((*entries)[0].kind == Kind::kFile);
  CHECK((*entries)[1].name == "bin");
  CHECK((*entries)[1].kind == Kind::kSymlink);
  CHECK((*entries)[1].link_target == "usr/bin");
  CHECK((*entries)[2].kind == Kind::kDirectory);
  CHECK(ListRootEntries(root.path + "/missing").status().code() ==
        absl::StatusCode::kFailedPrecondition);
}

}  // namespace sandbox_spec_test
}  // namespace tessera::worker::sandbox
