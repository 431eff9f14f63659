#include "worker/daemon/preflight.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/byte_size.h"

namespace tessera::worker {
namespace {

v1::PreflightCheck Check(std::string name, bool passed, std::string detail) {
  v1::PreflightCheck c;
  c.set_name(std::move(name));
  c.set_passed(passed);
  c.set_detail(std::move(detail));
  return c;
}

std::string Gib(int64_t bytes) {
  return absl::StrFormat("%.2f GiB", static_cast<double>(bytes) / (1 << 30));
}

// What a write, sync, read and removal of a small file in `dir` says, or "" when it all worked.
std::string WriteProbe(const std::string& dir, const std::string& node) {
  const std::string path =
      absl::StrCat(dir, "/.tessera-preflight-", node, "-", ::getpid(), "-", ::gettid());
  const std::string payload = absl::StrCat("tessera pre-flight probe of ", node, "\n");
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return absl::StrCat("cannot create a file in ", dir, ": ", std::strerror(errno));
  std::string error;
  if (::write(fd, payload.data(), payload.size()) != static_cast<ssize_t>(payload.size())) {
    error = absl::StrCat("cannot write to ", path, ": ", std::strerror(errno));
  } else if (::fsync(fd) != 0) {
    error = absl::StrCat("cannot sync ", path, ": ", std::strerror(errno));
  }
  ::close(fd);
  if (error.empty()) {
    char back[256] = {};
    const int rd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const ssize_t n = rd < 0 ? -1 : ::read(rd, back, sizeof back);
    if (rd >= 0) ::close(rd);
    if (n != static_cast<ssize_t>(payload.size()) ||
        std::string(back, static_cast<size_t>(n)) != payload) {
      error = absl::StrCat("what was written to ", path, " did not read back");
    }
  }
  if (::unlink(path.c_str()) != 0 && error.empty()) {
    error = absl::StrCat("cannot remove ", path, ": ", std::strerror(errno));
  }
  return error;
}

}  // namespace

PreflightChecker::PreflightChecker(PreflightConfig config,
                                   std::function<absl::StatusOr<GpuInventory>()> discover,
                                   const ClockSkew* skew,
                                   std::shared_ptr<image::ToolRunner> scripts,
                                   std::shared_ptr<tessera::Clock> clock)
    : config_(std::move(config)),
      discover_(std::move(discover)),
      skew_(skew),
      scripts_(std::move(scripts)),
      clock_(std::move(clock)) {}

std::vector<v1::PreflightCheck> PreflightChecker::Run(const v1::StartAttempt& start) const {
  std::vector<v1::PreflightCheck> out;
  auto timed = [&](const std::function<v1::PreflightCheck()>& check) {
    const absl::Time began = clock_->Now();
    v1::PreflightCheck c = check();
    c.set_seconds(absl::ToDoubleSeconds(clock_->Now() - began));
    out.push_back(std::move(c));
  };
  const absl::Time began = clock_->Now();
  const absl::StatusOr<GpuInventory> found = discover_();
  const double discovery = absl::ToDoubleSeconds(clock_->Now() - began);
  out.push_back(Gpus(start, found));
  out.back().set_seconds(discovery);
  if (auto d = Driver(start, found)) out.push_back(*std::move(d));
  timed([&] {
    return FreeSpace("disk:" + config_.state_dir, config_.state_dir, config_.min_free_disk_bytes);
  });
  if (!config_.shared_dir.empty()) {
    timed([&] {
      return FreeSpace("disk:" + config_.shared_dir, config_.shared_dir,
                       config_.min_free_disk_bytes);
    });
    timed([&] { return SharedWritable(); });
  }
  timed([&] { return FreeSpace("shm", config_.shm_dir, config_.min_shm_bytes); });
  if (auto c = ClockCheck(start)) out.push_back(*std::move(c));
  for (const auto& script : config_.scripts) timed([&] { return Script(script, start); });
  return out;
}

v1::PreflightCheck PreflightChecker::Gpus(const v1::StartAttempt& start,
                                          const absl::StatusOr<GpuInventory>& found) const {
  const int wanted = start.gpu_indices_size();
  if (wanted == 0) return Check("gpus", true, "no GPUs asked for");
  if (!found.ok()) {
    return Check("gpus", false,
                 absl::StrCat("the GPUs cannot be listed: ", found.status().message()));
  }
  for (int k = 0; k < wanted; ++k) {
    const int index = start.gpu_indices(k);
    const std::string expected =
        k < start.preflight().gpu_uuids_size() ? start.preflight().gpu_uuids(k) : "";
    const v1::Gpu* gpu = nullptr;
    for (const auto& g : found->gpus) {
      if (g.index() == index) gpu = &g;
    }
    if (gpu == nullptr) {
      return Check("gpus", false,
                   absl::StrCat("GPU ", index, expected.empty() ? "" : " (" + expected + ")",
                                " is missing: the node now has ", found->gpus.size(), " GPU",
                                found->gpus.size() == 1 ? "" : "s"));
    }
    if (!expected.empty() && gpu->uuid() != expected) {
      return Check("gpus", false,
                   absl::StrCat("GPU ", index, " is ", gpu->uuid(), ", but registered as ",
                                expected, " (a GPU was replaced or the devices renumbered)"));
    }
  }
  return Check("gpus", true,
               absl::StrCat(wanted, " of ", wanted, " GPU", wanted == 1 ? "" : "s",
                            " present with the UUIDs they registered with"));
}

std::optional<v1::PreflightCheck> PreflightChecker::Driver(
    const v1::StartAttempt& start, const absl::StatusOr<GpuInventory>& found) const {
  const std::string& expected = start.preflight().driver_version();
  if (expected.empty()) return std::nullopt;  // the cluster agrees on none, or has no drivers
  const std::string mine = found.ok() ? found->driver_version : "";
  if (mine == expected)
    return Check("driver", true, absl::StrCat("driver ", mine, ", as the cluster's"));
  return Check("driver", false,
               absl::StrCat("driver ", mine.empty() ? std::string("unknown") : mine,
                            ", but the rest of the cluster runs ", expected));
}

v1::PreflightCheck PreflightChecker::FreeSpace(const std::string& name, const std::string& path,
                                               int64_t required) const {
  struct statvfs s {};
  if (::statvfs(path.c_str(), &s) != 0) {
    return Check(name, false, absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  const int64_t available = static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
  const int64_t size = static_cast<int64_t>(s.f_blocks) * static_cast<int64_t>(s.f_frsize);
  return Check(name, available >= required,
               absl::StrCat(path, " has ", Gib(available), " free of ", Gib(size), "; ",
                            FormatByteSize(required), " required"));
}

v1::PreflightCheck PreflightChecker::SharedWritable() const {
  const std::string error = WriteProbe(config_.shared_dir, config_.node_name);
  if (!error.empty()) return Check("shared-writable", false, error);
  return Check("shared-writable", true,
               absl::StrCat(config_.shared_dir, " took a file: written, synced, read back"));
}

std::optional<v1::PreflightCheck> PreflightChecker::ClockCheck(
    const v1::StartAttempt& start) const {
  const double bound = start.preflight().max_clock_skew_seconds();
  if (bound <= 0 || skew_ == nullptr) return std::nullopt;
  const auto estimate = skew_->Latest();
  if (!estimate) return Check("clock", true, "not measured yet (no heartbeat answered)");
  const double offset = absl::ToDoubleSeconds(estimate->offset);
  const double slack = absl::ToDoubleSeconds(estimate->uncertainty);
  // Only an offset beyond the bound even at the measurement's most favourable reading fails.
  const bool passed = std::abs(offset) - slack <= bound;
  return Check("clock", passed,
               absl::StrFormat("the wall clock is %.3f s %s the control plane's (+- %.3f s); "
                               "at most %.3g s allowed",
                               std::abs(offset), offset > 0 ? "behind" : "ahead of", slack, bound));
}

v1::PreflightCheck PreflightChecker::Script(const std::string& path,
                                            const v1::StartAttempt& start) const {
  const std::string name = absl::StrCat("script:", std::filesystem::path(path).filename().string());
  if (scripts_ == nullptr) return Check(name, false, "no way to run scripts on this worker");
  auto result = scripts_->Run({"env", "TESSERA_NODE_NAME=" + config_.node_name,
                               "TESSERA_RUN_NAME=" + start.run_name(), path},
                              config_.script_timeout);
  if (!result.ok()) {
    return Check(name, false,
                 absl::IsDeadlineExceeded(result.status())
                     ? absl::StrCat(path, " did not finish within ",
                                    absl::FormatDuration(config_.script_timeout), ": killed")
                     : absl::StrCat(path, ": ", result.status().message()));
  }
  std::string output(absl::StripAsciiWhitespace(result->output));
  if (output.size() > 2000) output = "..." + output.substr(output.size() - 2000);
  if (result->exit_code != 0) {
    return Check(
        name, false,
        absl::StrCat(path, " exited with ", result->exit_code, output.empty() ? "" : ": ", output));
  }
  return Check(name, true, absl::StrCat(path, " passed", output.empty() ? "" : ": ", output));
}

bool AllPassed(const std::vector<v1::PreflightCheck>& checks) {
  for (const auto& c : checks) {
    if (!c.passed()) return false;
  }
  return true;
}

absl::Status ValidatePreflightConfig(const PreflightConfig& c) {
  if (c.min_free_disk_bytes < 0) {
    return absl::InvalidArgumentError("--preflight-min-free-disk: must not be negative");
  }
  if (c.min_shm_bytes < 0) {
    return absl::InvalidArgumentError("--preflight-min-shm: must not be negative");
  }
  if (c.script_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--preflight-timeout-seconds: must be more than 0");
  }
  for (const auto& s : c.scripts) {
    std::error_code ec;
    const auto status = std::filesystem::status(s, ec);
    if (ec || !std::filesystem::is_regular_file(status)) {
      return absl::InvalidArgumentError(absl::StrCat("--preflight-check: ", s, " is not a file"));
    }
    if (::access(s.c_str(), X_OK) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--preflight-check: ", s, " is not executable"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker
