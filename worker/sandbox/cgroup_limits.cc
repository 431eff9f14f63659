#include "worker/sandbox/cgroup_limits.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"

namespace tessera::worker::sandbox {
namespace fs = std::filesystem;
namespace {

constexpr int64_t kCpuPeriodMicros = 100000;

absl::Status WriteControl(const fs::path& file, const std::string& value) {
  std::ofstream out(file);
  out << value;
  out.close();
  if (!out) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write '", value, "' to ", file.string()));
  }
  return absl::OkStatus();
}

// A parent folder we may create cgroups in: made if missing, then probed with a child.
std::string Usable(const fs::path& parent) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return absl::StrCat("cannot create ", parent.string(), ": ", ec.message());
  const fs::path probe = parent / absl::StrCat(".probe-", ::getpid());
  fs::create_directory(probe, ec);
  if (ec) return absl::StrCat("cannot create cgroups in ", parent.string(), ": ", ec.message());
  fs::remove(probe, ec);
  return "";
}

}  // namespace

Cgroups Cgroups::Detect(const std::string& root, const std::string& parent) {
  Cgroups c;
  const fs::path r(root);
  std::error_code ec;
  if (fs::exists(r / "memory" / "memory.limit_in_bytes", ec) &&
      fs::exists(r / "cpu" / "cpu.cfs_quota_us", ec)) {
    c.memory_dir_ = (r / "memory" / parent).string();
    c.cpu_dir_ = (r / "cpu" / parent).string();
    c.why_not_ = Usable(c.memory_dir_);
    if (c.why_not_.empty()) c.why_not_ = Usable(c.cpu_dir_);
    if (fs::exists(r / "pids" / "cgroup.procs", ec) &&
        Usable((r / "pids" / parent).string()).empty()) {
      c.pids_dir_ = (r / "pids" / parent).string();
    }
    return c;
  }
  auto controllers = ReadWholeFile((r / "cgroup.controllers").string());
  if (controllers.ok()) {
    c.v2_ = true;
    if (!absl::StrContains(*controllers, "memory") || !absl::StrContains(*controllers, "cpu")) {
      c.why_not_ = "cgroup v2 without the memory and cpu controllers";
      return c;
    }
    c.memory_dir_ = c.cpu_dir_ = (r / parent).string();
    c.why_not_ = Usable(c.memory_dir_);
    if (c.why_not_.empty()) {
      // Controllers must be handed down to Tessera's parent for its children to use them.
      (void)WriteControl(fs::path(c.memory_dir_) / "cgroup.subtree_control", "+memory +cpu");
      if (absl::StrContains(*controllers, "pids") &&
          WriteControl(fs::path(c.memory_dir_) / "cgroup.subtree_control", "+pids").ok()) {
        c.pids_dir_ = c.memory_dir_;
      }
    }
    return c;
  }
  c.why_not_ = absl::StrCat("no cgroup memory and cpu controllers under ", root);
  return c;
}

absl::StatusOr<std::vector<std::string>> Cgroups::Create(const std::string& name,
                                                         const ResourceLimits& limits) const {
  if (!available()) return absl::FailedPreconditionError(why_not_);
  std::vector<std::string> procs;
  std::error_code ec;
  const fs::path mem = fs::path(memory_dir_) / name;
  fs::create_directories(mem, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", mem.string()));
  const int64_t quota =
      limits.cpus > 0 ? static_cast<int64_t>(std::ceil(limits.cpus * kCpuPeriodMicros)) : -1;
  if (v2_) {
    if (limits.memory_bytes > 0) {
      if (auto st = WriteControl(mem / "memory.max", std::to_string(limits.memory_bytes)); !st.ok())
        return st;
      (void)WriteControl(mem / "memory.swap.max", "0");
    }
    if (quota > 0) {
      if (auto st = WriteControl(mem / "cpu.max", absl::StrCat(quota, " ", kCpuPeriodMicros));
          !st.ok())
        return st;
    }
    if (limits.processes > 0 && !pids_dir_.empty()) {
      if (auto st = WriteControl(mem / "pids.max", std::to_string(limits.processes)); !st.ok())
        return st;
    }
    procs.push_back((mem / "cgroup.procs").string());
    return procs;
  }
  if (limits.memory_bytes > 0) {
    if (auto st = WriteControl(mem / "memory.limit_in_bytes", std::to_string(limits.memory_bytes));
        !st.ok())
      return st;
    // Memory and swap together, where the kernel accounts swap: the limit is not a swap quota.
    (void)WriteControl(mem / "memory.memsw.limit_in_bytes", std::to_string(limits.memory_bytes));
  }
  procs.push_back((mem / "cgroup.procs").string());
  const fs::path cpu = fs::path(cpu_dir_) / name;
  fs::create_directories(cpu, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", cpu.string()));
  if (quota > 0) {
    if (auto st = WriteControl(cpu / "cpu.cfs_period_us", std::to_string(kCpuPeriodMicros));
        !st.ok())
      return st;
    if (auto st = WriteControl(cpu / "cpu.cfs_quota_us", std::to_string(quota)); !st.ok())
      return st;
  }
  procs.push_back((cpu / "cgroup.procs").string());
  if (limits.processes > 0 && !pids_dir_.empty()) {
    const fs::path pids = fs::path(pids_dir_) / name;
    fs::create_directories(pids, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", pids.string()));
    if (auto st = WriteControl(pids / "pids.max", std::to_string(limits.processes)); !st.ok())
      return st;
    procs.push_back((pids / "cgroup.procs").string());
  }
  return procs;
}

int64_t Cgroups::OomKills(const std::string& name) const {
  if (memory_dir_.empty()) return 0;
  std::ifstream in(fs::path(memory_dir_) / name / (v2_ ? "memory.events" : "memory.oom_control"));
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return 0;
}

void Cgroups::Remove(const std::string& name) const {
  if (memory_dir_.empty()) return;
  std::error_code ec;
  fs::remove(fs::path(memory_dir_) / name, ec);  // rmdir: only an empty cgroup goes
  if (cpu_dir_ != memory_dir_) fs::remove(fs::path(cpu_dir_) / name, ec);
  if (!pids_dir_.empty() && pids_dir_ != memory_dir_) fs::remove(fs::path(pids_dir_) / name, ec);
}

}  // namespace tessera::worker::sandbox
