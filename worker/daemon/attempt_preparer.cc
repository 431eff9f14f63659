#include "worker/daemon/attempt_preparer.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "proto/policy/images.h"
#include "proto/policy/preflight.h"
#include "runspec/integrations.h"
#include "worker/daemon/integration_script.h"
#include "worker/daemon/preflight.h"
#include "worker/daemon/rank_secrets.h"
#include "worker/image/file_stream.h"

namespace tessera::worker {
namespace fs = std::filesystem;

namespace {

// Writes each `local` integration's files (a gzip tar) into the working folder, where the
// integration script unpacks and deletes them. The folder belongs to the rank's user, so a name
// there may already be a link it made: the file is created anew, never opened through a link.
absl::Status WriteLocalArchives(const v1::StartAttempt& start, const std::string& work_dir) {
  int dir = -1;
  absl::Status st;
  for (int n = 0; n < start.integrations_size() && st.ok(); ++n) {
    const v1::Integration& i = start.integrations(n);
    if (i.integration_type() != "local") continue;
    std::string archive;
    if (!absl::Base64Unescape(spec::IntegrationText(i, "archive"), &archive)) {
      st = absl::InvalidArgumentError(absl::StrCat("integration ", spec::DescribeIntegration(i),
                                                   ": its archive is not base64"));
      break;
    }
    if (dir < 0) dir = ::open(work_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
      st = absl::InternalError(absl::StrCat("open ", work_dir, ": ", std::strerror(errno)));
      break;
    }
    const std::string name = LocalArchiveName(n);
    ::unlinkat(dir, name.c_str(), 0);
    const int fd =
        ::openat(dir, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
      st = absl::InternalError(
          absl::StrCat("cannot create ", work_dir, "/", name, ": ", std::strerror(errno)));
      break;
    }
    ::fchmod(fd, 0644);  // whatever the umask: the rank's user reads it
    st = image::WriteAll(fd, archive.data(), archive.size());
    ::close(fd);
  }
  if (dir >= 0) ::close(dir);
  return st;
}

}  // namespace

AttemptPreparer::AttemptPreparer(AttemptPreparerOptions options) : options_(std::move(options)) {}

Preparation AttemptPreparer::Prepare(
    const v1::StartAttempt& start, const Cancelled& cancelled,
    const std::function<void(const std::string&)>& progress) const {
  Preparation p;
  if (options_.preflight) {
    std::vector<v1::PreflightCheck> checks = options_.preflight(start);
    if (cancelled()) return p;
    if (!AllPassed(checks)) {
      for (auto& c : checks) *p.failure.add_preflight_checks() = std::move(c);
      const std::string failed = FailedPreflightChecks(p.failure.preflight_checks());
      spdlog::error("run {} attempt {}: this node failed its pre-flight checks: {}", start.run_id(),
                    start.resumption_index(), failed);
      p.failure.set_detail(absl::StrCat("pre-flight checks failed: ", failed));
      p.outcome = Preparation::Outcome::kFailed;
      return p;
    }
  }
  if (IsHostImage(start.image())) {
    p.outcome = Preparation::Outcome::kReady;
    return p;
  }
  auto image = AcquireImage(start, progress);
  if (cancelled()) {
    spdlog::info("run {} attempt {}: stopped while its image was prepared", start.run_id(),
                 start.resumption_index());
    if (image.ok()) options_.images->Release(image->digest);
    return p;
  }
  if (!image.ok()) {
    spdlog::warn("run {} attempt {}: {}", start.run_id(), start.resumption_index(),
                 image.status().ToString());
    p.failure.set_setup_failure(true);
    p.failure.set_detail(std::string(image.status().message()));
    p.outcome = Preparation::Outcome::kFailed;
    return p;
  }
  p.root = RankRoot{image->rootfs, image->env};
  p.digest = image->digest;
  p.outcome = Preparation::Outcome::kReady;
  return p;
}

absl::StatusOr<image::PreparedImage> AttemptPreparer::AcquireImage(
    const v1::StartAttempt& start, const std::function<void(const std::string&)>& progress) const {
  // The owner's credentials for the image's registry, if they gave some (a docker-registry
  // secret), in a file only the worker reads, for this pull only.
  std::string auth_file;
  if (const v1::SecretValue* creds =
          RegistrySecretFor(start, options_.images->RegistryOf(start.image()))) {
    auth_file = absl::StrCat(options_.state_dir, "/runs/", start.run_id(), "-registry-auth.json");
    if (auto st = WriteRegistryAuth(auth_file, *creds); !st.ok()) {
      spdlog::warn("run {}: {}", start.run_id(), st.ToString());
      auth_file.clear();
    }
  }
  auto image = options_.images->Acquire(start.image(), start.image_digest(), progress, auth_file);
  if (!auth_file.empty()) {
    std::error_code ignored;
    fs::remove(auth_file, ignored);
  }
  return image;
}

absl::Status AttemptPreparer::RunIntegrations(const v1::StartAttempt& start,
                                              const AttemptPaths& paths, const RankSpec& first,
                                              const Cancelled& cancelled,
                                              const IntegrationOutput& output) const {
  if (absl::Status st = WriteLocalArchives(start, paths.work_dir); !st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the integrations could not start: ", st.message()));
  }
  RankSpec setup = first;
  setup.command = IntegrationScript(start.integrations());
  output.begins();
  auto proc = RankProcess::Start(setup);
  if (!proc.ok()) {
    return absl::InternalError(
        absl::StrCat("the integrations could not start: ", proc.status().message()));
  }
  spdlog::info("run {} attempt {}: running its integrations (pid {})", start.run_id(),
               start.resumption_index(), (*proc)->pid());
  while (!(*proc)->Poll()) {
    if (cancelled()) {
      (void)(*proc)->Stop(absl::Seconds(2), *options_.clock);
      return absl::CancelledError("stopped while its integrations ran");
    }
    options_.clock->SleepFor(absl::Milliseconds(50));
  }
  const ExitInfo exit = *(*proc)->exit();
  if (exit.exit_code == 0 && !exit.signaled()) return absl::OkStatus();
  output.ends();  // what it printed is shipped, and that is all
  const int index = exit.exit_code - kFirstIntegrationExit;
  if (index >= 0 && index < start.integrations_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("integration ", spec::DescribeIntegration(start.integrations(index)),
                     " failed (its output is in rank ", first.rank, "'s log)"));
  }
  return absl::FailedPreconditionError(absl::StrCat("the integrations failed: ", exit.ToString()));
}

}  // namespace tessera::worker
