// Everything a sandboxed rank needs to use the one GPU it was given, and nothing that lets it
// use another: the device nodes (gpu_devices.h), the driver's user-space half where the root is
// an image, and the variables that point CUDA at the GPU.
//
// Which GPU is which. Tessera's GPU index on a node is NVML's index, which need not be the
// device minor number (the N of /dev/nvidiaN); the worker maps one to the other by UUID
// (GpuMinorsByUuid) at start, and where it cannot, takes them to be equal. CUDA numbers the devices
// it can see in its own order (fastest first, unless CUDA_DEVICE_ORDER says otherwise), and inside
// the sandbox it sees only the rank's device, so a host index in CUDA_VISIBLE_DEVICES would name a
// device that is not there. The driver publishes each GPU's minor number and UUID in
// /proc/driver/nvidia/gpus/<bus id>/information, so the rank is given its GPU by UUID
// (CUDA_VISIBLE_DEVICES=GPU-...), which means the same device in any numbering. Where the driver
// publishes nothing (simulated GPUs), the index stays.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "worker/sandbox/gpu_devices.h"
#include "worker/sandbox/sandbox_spec.h"

namespace tessera::worker::sandbox {

struct GpuNodeOptions {
  // Where the GPUs' device nodes are (/dev; a folder of simulated ones in tests).
  std::string device_dir = "/dev";
  // Where the driver describes each GPU.
  std::string driver_gpus_dir = "/proc/driver/nvidia/gpus";
  std::vector<std::string> driver_lib_dirs = DefaultDriverLibDirs();
  std::vector<std::string> driver_bin_dirs = DefaultDriverBinDirs();
  // Tessera's GPU index -> device minor number, where they differ.
  std::map<int, int> minor_by_index;
  // Where the driver lists MIG instances (MigInstancesPresent).
  std::string driver_caps_dir = "/proc/driver/nvidia/capabilities";
  // Runs may profile (tessera-worker --gpu-profiling): their GPUs' profiling node is bound.
  bool profiling = false;
};

struct GpuAccess {
  std::vector<BindMount> mounts;
  // The GPUs as CUDA should be told (UUIDs, or indices where no UUID is known), comma-separated.
  std::string visible_devices;
  bool driver_mounted = false;  // the driver's files are under kDriverLibDir / kDriverBinDir
};

// What of the node's NVIDIA stack is found once, when the worker starts, not at each rank's
// start: the driver's files (a scan of the library folders) and each GPU's UUID.
struct GpuNode {
  GpuNodeOptions options;
  std::vector<BindMount> driver_mounts;      // DriverMounts of options' folders
  std::map<int, std::string> uuid_by_minor;  // from the driver's descriptions
  bool mig = false;                          // its GPUs are split by MIG

  static GpuNode Discover(GpuNodeOptions options);
};

// What a sandbox with the GPUs `gpu_indices` gets (a rank's one GPU, a node container's
// every GPU of the run in local-rank order; none: a CPU run): their device nodes, and
// CUDA_VISIBLE_DEVICES naming them in that order. `in_image`: its root is an image, which
// cannot carry the driver's user-space libraries (they must match the host's kernel module), so
// they and the driver's tools are bound in, the way the NVIDIA container toolkit does.
// `across_nodes`: the run spans nodes (its sandbox gets the node's RDMA devices).
GpuAccess PlanGpuAccess(const GpuNode& node, const std::vector<int>& gpu_indices, bool in_image,
                        bool across_nodes = false);

// Sets CUDA_VISIBLE_DEVICES and, where the driver was bound in, puts its folders on
// LD_LIBRARY_PATH (first) and PATH (last). `path_if_unset` is used where env has no PATH.
void ApplyGpuEnvironment(const GpuAccess& access, const std::string& path_if_unset,
                         std::map<std::string, std::string>& env);

// Every GPU's device minor number by UUID, from the driver's description of each GPU under
// `driver_gpus_dir`; GPUs it says nothing of are left out.
std::map<std::string, int> GpuMinorsByUuid(const std::string& driver_gpus_dir);

}  // namespace tessera::worker::sandbox
