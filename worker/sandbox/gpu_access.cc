#include "worker/sandbox/gpu_access.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera::worker::sandbox {
namespace fs = std::filesystem;
namespace {

// "Key:   value" lines of a driver information file.
std::map<std::string, std::string> ReadInformation(const fs::path& file) {
  std::map<std::string, std::string> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    out[std::string(absl::StripAsciiWhitespace(line.substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return out;
}

// `dir` first in a colon-separated list, and not again later in it.
std::string Prepend(const std::string& dir, const std::string& list) {
  std::vector<std::string> parts = {dir};
  for (absl::string_view p : absl::StrSplit(list, ':', absl::SkipEmpty())) {
    if (p != dir) parts.emplace_back(p);
  }
  return absl::StrJoin(parts, ":");
}

}  // namespace

std::map<std::string, int> GpuMinorsByUuid(const std::string& driver_gpus_dir) {
  std::map<std::string, int> out;
  std::error_code ec;
  for (fs::directory_iterator it(driver_gpus_dir, ec), end; !ec && it != end; it.increment(ec)) {
    auto info = ReadInformation(it->path() / "information");
    int minor = -1;
    if (absl::SimpleAtoi(info["Device Minor"], &minor) && minor >= 0 &&
        absl::StartsWith(info["GPU UUID"], "GPU-")) {
      out[info["GPU UUID"]] = minor;
    }
  }
  return out;
}

GpuNode GpuNode::Discover(GpuNodeOptions options) {
  GpuNode node;
  node.driver_mounts = DriverMounts(options.driver_lib_dirs, options.driver_bin_dirs);
  for (const auto& [uuid, minor] : GpuMinorsByUuid(options.driver_gpus_dir)) {
    node.uuid_by_minor[minor] = uuid;
  }
  node.mig = MigInstancesPresent(options.driver_caps_dir);
  node.options = std::move(options);
  return node;
}

GpuAccess PlanGpuAccess(const GpuNode& node, const std::vector<int>& gpu_indices, bool in_image,
                        bool across_nodes) {
  GpuAccess access;
  if (gpu_indices.empty()) return access;
  const auto& minors = node.options.minor_by_index;
  std::vector<int> device_minors;
  std::vector<std::string> visible;
  for (const int index : gpu_indices) {
    const auto mapped = minors.find(index);
    const int minor = mapped == minors.end() ? index : mapped->second;
    device_minors.push_back(minor);
    const auto uuid = node.uuid_by_minor.find(minor);
    visible.push_back(uuid == node.uuid_by_minor.end() ? std::to_string(index) : uuid->second);
  }
  access.mounts =
      GpuDeviceMounts(node.options.device_dir, device_minors,
                      {.mig = node.mig, .profiling = node.options.profiling, .rdma = across_nodes});
  access.visible_devices = absl::StrJoin(visible, ",");
  if (in_image) {
    access.driver_mounted = !node.driver_mounts.empty();
    access.mounts.insert(access.mounts.end(), node.driver_mounts.begin(), node.driver_mounts.end());
  }
  return access;
}

void ApplyGpuEnvironment(const GpuAccess& access, const std::string& path_if_unset,
                         std::map<std::string, std::string>& env) {
  if (access.visible_devices.empty()) return;
  env["CUDA_VISIBLE_DEVICES"] = access.visible_devices;
  if (!access.driver_mounted) return;
  env["LD_LIBRARY_PATH"] = Prepend(kDriverLibDir, env["LD_LIBRARY_PATH"]);
  const std::string path = env.count("PATH") ? env["PATH"] : path_if_unset;
  env["PATH"] = absl::StrCat(path, ":", kDriverBinDir);
}

}  // namespace tessera::worker::sandbox
