// What of the host's NVIDIA stack a sandboxed rank gets, the way the NVIDIA container toolkit
// gives it to a container: the device nodes of its own GPUs (and no other GPU's), the control
// nodes every CUDA process needs, and the driver's user-space libraries and tools, which
// belong to the host's kernel driver and so cannot come from the image.
#pragma once

#include <string>
#include <vector>

#include "worker/sandbox/sandbox_spec.h"

namespace tessera::worker::sandbox {

// Inside the sandbox: where the driver's libraries and tools are mounted (the container
// toolkit's convention), to be put on LD_LIBRARY_PATH and PATH.
inline constexpr char kDriverLibDir[] = "/usr/local/nvidia/lib64";
inline constexpr char kDriverBinDir[] = "/usr/local/nvidia/bin";

// What a sandbox's GPUs need of the node's devices beyond their own nodes and the control nodes
// CUDA opens (nvidiactl, nvidia-uvm), each only where it is so:
struct GpuDeviceNeeds {
  // The node's GPUs are split by MIG: nvidia-caps/ (the instances' access capabilities).
  bool mig = false;
  // The operator lets runs profile (--gpu-profiling): nvidia-uvm-tools (CUPTI's UVM counters).
  bool profiling = false;
  // The run spans nodes: infiniband/ (the RDMA devices NCCL's IB transport opens), where the
  // node has them.
  bool rdma = false;
};

// Device binds for the GPUs `gpu_indices` from `device_dir` (the host's /dev, or a folder of
// simulated nodes in tests): nvidia<N> for each index given, then nvidiactl and nvidia-uvm and
// what `needs` adds, those that exist. Each is bound at /dev/<name>. Never nvidia-modeset (the
// display's). Nothing when no GPU was given: a CPU rank sees no NVIDIA node at all.
std::vector<BindMount> GpuDeviceMounts(const std::string& device_dir,
                                       const std::vector<int>& gpu_indices,
                                       const GpuDeviceNeeds& needs = {});

// Whether the driver lists MIG instances under `caps_dir` (/proc/driver/nvidia/capabilities:
// gpu<N>/mig/gi<G> for each GPU instance).
bool MigInstancesPresent(const std::string& caps_dir);

// Read-only binds of the driver's libraries (libcuda, libnvidia-*, libnvcuvid ...) found in
// `lib_dirs` into kDriverLibDir, and of its tools (nvidia-smi ...) found in `bin_dirs` into
// kDriverBinDir. Symbolic links are resolved so that the sandbox gets the files themselves.
std::vector<BindMount> DriverMounts(const std::vector<std::string>& lib_dirs,
                                    const std::vector<std::string>& bin_dirs);

// The folders the dynamic linker searches, from `ld_so_conf` and the files it includes: where a
// node whose driver is not in a standard folder (/usr/local/nvidia/lib64 ...) keeps it.
std::vector<std::string> LinkerConfigDirs(const std::string& ld_so_conf = "/etc/ld.so.conf");

// Where the host keeps them: the standard folders of the distributions we know, the container
// toolkit's /usr/local/nvidia, then the dynamic linker's configured folders (earlier wins).
std::vector<std::string> DefaultDriverLibDirs();
std::vector<std::string> DefaultDriverBinDirs();

}  // namespace tessera::worker::sandbox
