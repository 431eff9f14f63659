#include "worker/sandbox/gpu_devices.h"

#include <glob.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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

void ReadLinkerConfig(const std::string& file, int depth, std::vector<std::string>& out) {
  if (depth > 8) return;  // an include loop
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    absl::string_view s = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&s, "include")) {
      std::string pattern(absl::StripAsciiWhitespace(s));
      if (!pattern.empty() && pattern[0] != '/') {
        pattern = (fs::path(file).parent_path() / pattern).string();
      }
      glob_t g{};
      if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; ++i) ReadLinkerConfig(g.gl_pathv[i], depth + 1, out);
      }
      ::globfree(&g);
    } else if (!s.empty() && s[0] == '/') {
      out.emplace_back(s);
    }
  }
}

}  // namespace

std::vector<BindMount> GpuDeviceMounts(const std::string& device_dir,
                                       const std::vector<int>& gpu_indices,
                                       const GpuDeviceNeeds& needs) {
  std::vector<BindMount> out;
  if (gpu_indices.empty()) return out;
  const fs::path dir(device_dir);
  for (int index : std::set<int>(gpu_indices.begin(), gpu_indices.end())) {
    const std::string name = absl::StrCat("nvidia", index);
    if (Exists(dir / name)) {
      out.push_back({(dir / name).string(), "/dev/" + name, /*writable=*/true, /*device=*/true});
    }
  }
  std::vector<const char*> names = {"nvidiactl", "nvidia-uvm"};
  if (needs.profiling) names.push_back("nvidia-uvm-tools");
  if (needs.mig) names.push_back("nvidia-caps");
  if (needs.rdma) names.push_back("infiniband");
  for (const char* name : names) {
    if (Exists(dir / name)) {
      out.push_back({(dir / name).string(), absl::StrCat("/dev/", name), true, true});
    }
  }
  return out;
}

bool MigInstancesPresent(const std::string& caps_dir) {
  std::error_code ec;
  for (fs::directory_iterator gpu(caps_dir, ec), end; !ec && gpu != end; gpu.increment(ec)) {
    if (gpu->path().filename().string().rfind("gpu", 0) != 0) continue;
    std::error_code inner;
    for (fs::directory_iterator gi(gpu->path() / "mig", inner); !inner && gi != end;
         gi.increment(inner)) {
      if (gi->path().filename().string().rfind("gi", 0) == 0) return true;
    }
  }
  return false;
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

std::vector<std::string> LinkerConfigDirs(const std::string& ld_so_conf) {
  std::vector<std::string> all, out;
  ReadLinkerConfig(ld_so_conf, 0, all);
  std::set<std::string> seen;
  for (auto& d : all) {
    if (seen.insert(d).second) out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> DefaultDriverLibDirs() {
  std::vector<std::string> dirs = {
      "/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
      "/usr/local/nvidia/lib64",   "/usr/local/nvidia/lib"};
  for (auto& d : LinkerConfigDirs()) dirs.push_back(std::move(d));
  return dirs;
}

std::vector<std::string> DefaultDriverBinDirs() {
  return {"/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin"};
}

}  // namespace tessera::worker::sandbox
