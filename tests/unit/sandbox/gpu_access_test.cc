// A rank's GPU inside its sandbox: named by UUID, the driver found where the node keeps it, and
// the image's own library path kept.
#include "worker/sandbox/gpu_access.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace tessera::worker::sandbox {
namespace gpu_access_test {

using testing::TempDir;

// A driver's /proc/driver/nvidia/gpus with one folder per GPU.
void DescribeGpu(const std::string& dir, const std::string& bus, int minor,
                 const std::string& uuid) {
  std::filesystem::create_directories(dir + "/" + bus);
  std::ofstream(dir + "/" + bus + "/information")
      << "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 42\nGPU UUID: \t " << uuid
      << "\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDevice Minor: \t " << minor
      << "\nBus Location: \t " << bus << "\n";
}

TEST_CASE("a GPU is found by its device minor number in the driver's description", "[sandbox]") {
  TempDir gpus;
  DescribeGpu(gpus.path, "0000:1b:00.0", 3, "GPU-aaaaaaaa-1111-2222-3333-444444444444");
  DescribeGpu(gpus.path, "0000:2a:00.0", 0, "GPU-bbbbbbbb-1111-2222-3333-444444444444");
  GpuNodeOptions options;
  options.driver_gpus_dir = gpus.path;
  const GpuNode node = GpuNode::Discover(options);
  CHECK(node.uuid_by_minor ==
        std::map<int, std::string>{{0, "GPU-bbbbbbbb-1111-2222-3333-444444444444"},
                                   {3, "GPU-aaaaaaaa-1111-2222-3333-444444444444"}});
  CHECK(node.uuid_by_minor.count(1) == 0);
  CHECK(GpuMinorsByUuid(gpus.path + "/missing").empty());
  CHECK(GpuMinorsByUuid(gpus.path) ==
        std::map<std::string, int>{{"GPU-aaaaaaaa-1111-2222-3333-444444444444", 3},
                                   {"GPU-bbbbbbbb-1111-2222-3333-444444444444", 0}});
}

TEST_CASE("where NVML's index is not the device minor, the rank gets the minor's node",
          "[sandbox]") {
  TempDir dev, gpus;
  for (const char* name : {"nvidia0", "nvidia1"}) std::ofstream(dev.path + "/" + name) << "";
  DescribeGpu(gpus.path, "0000:1b:00.0", 1, "GPU-aaaaaaaa-1111-2222-3333-444444444444");
  GpuNodeOptions options;
  options.device_dir = dev.path;
  options.driver_gpus_dir = gpus.path;
  options.minor_by_index = {{0, 1}, {1, 0}};
  GpuAccess access = PlanGpuAccess(GpuNode::Discover(options), {0}, /*in_image=*/false);
  REQUIRE_FALSE(access.mounts.empty());
  CHECK(access.mounts[0].target == "/dev/nvidia1");
  CHECK(access.visible_devices == "GPU-aaaaaaaa-1111-2222-3333-444444444444");
}

TEST_CASE("a rank is given its GPU by UUID, which means the same device in CUDA's numbering",
          "[sandbox]") {
  TempDir dev, gpus;
  for (const char* name : {"nvidia0", "nvidia3", "nvidiactl"}) {
    std::ofstream(dev.path + "/" + name) << "";
  }
  DescribeGpu(gpus.path, "0000:1b:00.0", 3, "GPU-aaaaaaaa-1111-2222-3333-444444444444");
  GpuNodeOptions options;
  options.device_dir = dev.path;
  options.driver_gpus_dir = gpus.path;
  options.driver_lib_dirs = {};
  options.driver_bin_dirs = {};

  GpuAccess access = PlanGpuAccess(GpuNode::Discover(options), {3}, /*in_image=*/false);
  CHECK(access.visible_devices == "GPU-aaaaaaaa-1111-2222-3333-444444444444");
  REQUIRE(access.mounts.size() == 2);
  CHECK(access.mounts[0].target == "/dev/nvidia3");
  std::map<std::string, std::string> env = {{"CUDA_VISIBLE_DEVICES", "3"}, {"PATH", "/bin"}};
  ApplyGpuEnvironment(access, "/usr/bin", env);
  CHECK(env["CUDA_VISIBLE_DEVICES"] == "GPU-aaaaaaaa-1111-2222-3333-444444444444");
  CHECK(env["PATH"] == "/bin");  // on the host's root the driver is where it always is
  CHECK(env.count("LD_LIBRARY_PATH") == 0);

  // Where the driver says nothing (simulated GPUs), the index stays.
  CHECK(PlanGpuAccess(GpuNode::Discover(options), {0}, false).visible_devices == "0");
  // A CPU rank gets nothing and its environment is left alone.
  GpuAccess none = PlanGpuAccess(GpuNode::Discover(options), {}, true);
  CHECK(none.mounts.empty());
  std::map<std::string, std::string> cpu_env = {{"PATH", "/bin"}};
  ApplyGpuEnvironment(none, "/usr/bin", cpu_env);
  CHECK(cpu_env == std::map<std::string, std::string>{{"PATH", "/bin"}});
}

TEST_CASE("a node container gets every GPU of the run, named in local-rank order", "[sandbox]") {
  TempDir dev, gpus;
  for (const char* name : {"nvidia0", "nvidia1", "nvidia2", "nvidia3", "nvidiactl"}) {
    std::ofstream(dev.path + "/" + name) << "";
  }
  DescribeGpu(gpus.path, "0000:1b:00.0", 3, "GPU-aaaaaaaa-1111-2222-3333-444444444444");
  DescribeGpu(gpus.path, "0000:1c:00.0", 1, "GPU-bbbbbbbb-1111-2222-3333-444444444444");
  GpuNodeOptions options;
  options.device_dir = dev.path;
  options.driver_gpus_dir = gpus.path;
  options.driver_lib_dirs = {};
  options.driver_bin_dirs = {};
  // Local rank 0 has GPU 3, local rank 1 GPU 1: LOCAL_RANK indexes CUDA_VISIBLE_DEVICES.
  GpuAccess access = PlanGpuAccess(GpuNode::Discover(options), {3, 1}, /*in_image=*/false);
  CHECK(access.visible_devices ==
        "GPU-aaaaaaaa-1111-2222-3333-444444444444,GPU-bbbbbbbb-1111-2222-3333-444444444444");
  std::vector<std::string> targets;
  for (const auto& m : access.mounts) targets.push_back(m.target);
  // Those two and the control node; not GPUs 0 and 2.
  CHECK(std::count(targets.begin(), targets.end(), "/dev/nvidia3") == 1);
  CHECK(std::count(targets.begin(), targets.end(), "/dev/nvidia1") == 1);
  CHECK(std::count(targets.begin(), targets.end(), "/dev/nvidia0") == 0);
  CHECK(std::count(targets.begin(), targets.end(), "/dev/nvidia2") == 0);
  CHECK(std::count(targets.begin(), targets.end(), "/dev/nvidiactl") == 1);
}

TEST_CASE("in an image the driver is bound in and put before the image's own library path",
          "[sandbox]") {
  TempDir dev, lib, bin;
  std::ofstream(dev.path + "/nvidia0") << "";
  std::ofstream(lib.path + "/libcuda.so.580.1") << "x";
  std::ofstream(bin.path + "/nvidia-smi") << "x";
  GpuNodeOptions options;
  options.device_dir = dev.path;
  options.driver_gpus_dir = dev.path + "/none";
  options.driver_lib_dirs = {lib.path};
  options.driver_bin_dirs = {bin.path};
  GpuAccess access = PlanGpuAccess(GpuNode::Discover(options), {0}, /*in_image=*/true);
  CHECK(access.driver_mounted);
  std::vector<std::string> targets;
  for (const auto& m : access.mounts) targets.push_back(m.target);
  CHECK(targets == std::vector<std::string>{"/dev/nvidia0", "/usr/local/nvidia/bin/nvidia-smi",
                                            "/usr/local/nvidia/lib64/libcuda.so.580.1"});
  // A CUDA image's own LD_LIBRARY_PATH (its toolkit's libraries) is kept, after the driver.
  std::map<std::string, std::string> env = {{"LD_LIBRARY_PATH", "/usr/local/cuda/lib64"}};
  ApplyGpuEnvironment(access, "/usr/bin:/bin", env);
  CHECK(env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/cuda/lib64");
  // Where the image already names the driver's folder, it is not named twice.
  std::map<std::string, std::string> cuda_image = {
      {"LD_LIBRARY_PATH", "/usr/local/cuda/lib64:/usr/local/nvidia/lib64"}};
  ApplyGpuEnvironment(access, "/usr/bin:/bin", cuda_image);
  CHECK(cuda_image["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/cuda/lib64");
  CHECK(env["PATH"] == "/usr/bin:/bin:/usr/local/nvidia/bin");
  CHECK(env["CUDA_VISIBLE_DEVICES"] == "0");
}

TEST_CASE("the dynamic linker's folders are read from ld.so.conf and what it includes",
          "[sandbox]") {
  TempDir etc;
  std::filesystem::create_directories(etc.path + "/ld.so.conf.d");
  std::ofstream(etc.path + "/ld.so.conf")
      << "# the system's\n/usr/local/lib\ninclude " << etc.path << "/ld.so.conf.d/*.conf\n"
      << "include relative.conf\n";
  std::ofstream(etc.path + "/ld.so.conf.d/a-nvidia.conf") << "/usr/local/nvidia/lib64  # toolkit\n";
  std::ofstream(etc.path + "/ld.so.conf.d/b-cuda.conf") << "\n  /usr/local/cuda-13.0/lib\n";
  std::ofstream(etc.path + "/relative.conf") << "/opt/driver/lib\ninclude relative.conf\n";
  CHECK(LinkerConfigDirs(etc.path + "/ld.so.conf") ==
        std::vector<std::string>{"/usr/local/lib", "/usr/local/nvidia/lib64",
                                 "/usr/local/cuda-13.0/lib", "/opt/driver/lib"});
  CHECK(LinkerConfigDirs(etc.path + "/missing").empty());
}

}  // namespace gpu_access_test
}  // namespace tessera::worker::sandbox
