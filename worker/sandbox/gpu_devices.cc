#include "worker/sandbox/gpu_devices.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tessera::worker::sandbox {
namespace fs = std::filesystem;
namespace {

bool Exists(const fs::path& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

bool IsDriverLibrary(const std::string& name) {
  static const char* const kPrefixes[] = {
      "libcuda.so",    "libcudadebugger.so", "libnvidia-",       "libnvcuvid.so",
      "libnvoptix.so", "libGLX_nvidia.so",   "libEGL_nvidia.so", "libGLESv2_nvidia.so"};
  return absl::StrContains(name, ".so") &&
         std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                     [&](const char* p) { return absl::StartsWith(name, p); });
}

bool IsDriverTool(const std::string& name) {
  static const char* const kTools[] = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                                       "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"};
  return std::any_of(std::begin(kTools), std::end(kTools),
                     [&](const char* t) { return name == t; });
}

}  // namespace

std::vector<BindMount> GpuDeviceMounts(const std::string& device_dir,
                                       const std::vector<int>& gpu_indices) {
  std::vector<BindMount> out;
  if (gpu_indices.empty()) return out;
  const fs::path dir(device_dir);
  for (int index : std::set<int>(gpu_indices.begin(), gpu_indices.end())) {
    const std::string name = absl::StrCat("nvidia", index);
    if (Exists(dir / name)) {
      out.push_back({(dir / name).string(), "/dev/" + name, /*writable=*/true, /*device=*/true});
    }
  }
  for (const char* name :
       {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps"}) {
    if (Exists(dir / name)) {
      out.push_back({(dir / name).string(), absl::StrCat("/dev/", name), true, true});
    }
  }
  return out;
}

std::vector<BindMount> DriverMounts(const std::vector<std::string>& lib_dirs,
                                    const std::vector<std::string>& bin_dirs) {
  std::vector<BindMount> out;
  std::set<std::string> seen;
  auto add = [&](const fs::path& file, const char* into) {
    const std::string name = file.filename().string();
    if (!seen.insert(absl::StrCat(into, "/", name)).second) return;  // the first dir wins
    std::error_code ec;
    const fs::path real = fs::canonical(file, ec);
    if (ec || !fs::is_regular_file(real, ec)) return;
    out.push_back({real.string(), absl::StrCat(into, "/", name), false, false});
  };
  for (const auto& d : lib_dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      if (IsDriverLibrary(it->path().filename().string())) add(it->path(), kDriverLibDir);
    }
  }
  for (const auto& d : bin_dirs) {
    std::error_code ec;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      if (IsDriverTool(it->path().filename().string())) add(it->path(), kDriverBinDir);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const BindMount& a, const BindMount& b) { return a.target < b.target; });
  return out;
}

std::vector<std::string> DefaultDriverLibDirs() {
  return {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"};
}

std::vector<std::string> DefaultDriverBinDirs() { return {"/usr/bin", "/usr/local/bin"}; }

}  // namespace tessera::worker::sandbox
