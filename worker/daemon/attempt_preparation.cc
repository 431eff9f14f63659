// Preparing an attempt before its ranks start: pulling its image (with the owner's registry
// credentials), running its integrations, and who its ranks run as. Apart from
// attempt_manager.cc, which starts, watches and stops the ranks themselves.
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
#include "worker/daemon/attempt_manager.h"
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

void AttemptManager::Prepare(const v1::StartAttempt& start) {
  const Key key{start.run_id(), start.resumption_index()};
  auto progress = [&](const std::string& text) {
    v1::AttemptUpdate u;
    u.set_run_id(start.run_id());
    u.set_resumption_index(start.resumption_index());
    u.set_phase(v1::ATTEMPT_PHASE_PREPARING);
    u.set_detail(text);
    absl::MutexLock lock(&mu_);
    Queue(std::move(u));
  };
  if (options_.preflight) {
    std::vector<v1::PreflightCheck> checks = options_.preflight(start);
    {
      absl::MutexLock lock(&mu_);
      auto it = attempts_.find(key);
      if (it == attempts_.end() || it->second.cancelled) return;  // stopped meanwhile: reported
    }
    if (!AllPassed(checks)) {
      v1::AttemptUpdate u;
      for (auto& c : checks) *u.add_preflight_checks() = std::move(c);
      const std::string failed = FailedPreflightChecks(u.preflight_checks());
      spdlog::error("run {} attempt {}: this node failed its pre-flight checks: {}", start.run_id(),
                    start.resumption_index(), failed);
      u.set_detail(absl::StrCat("pre-flight checks failed: ", failed));
      EndUnlaunched(start, std::move(u));
      return;
    }
  }
  if (IsHostImage(start.image())) {
    (void)Launch(start, RankRoot{}, "", false);
    return;
  }
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
  bool cancelled;
  {
    absl::MutexLock lock(&mu_);
    auto it = attempts_.find(key);
    cancelled = it == attempts_.end() || it->second.cancelled;
  }
  if (cancelled) {
    spdlog::info("run {} attempt {}: stopped while its image was prepared", start.run_id(),
                 start.resumption_index());
    if (image.ok()) options_.images->Release(image->digest);
    return;
  }
  if (!image.ok()) {
    spdlog::warn("run {} attempt {}: {}", start.run_id(), start.resumption_index(),
                 image.status().ToString());
    v1::AttemptUpdate u;
    u.set_setup_failure(true);
    u.set_detail(std::string(image.status().message()));
    EndUnlaunched(start, std::move(u));
    return;
  }
  (void)Launch(start, RankRoot{image->rootfs, image->env}, image->digest, true);
}

absl::Status AttemptManager::RunIntegrations(const v1::StartAttempt& start, const Attempt& a,
                                             const RankSpec& first) {
  if (absl::Status st = WriteLocalArchives(start, a.paths.work_dir); !st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the integrations could not start: ", st.message()));
  }
  RankSpec setup = first;
  setup.command = IntegrationScript(start.integrations());
  // Its output is the first rank's, in the run's logs.
  on_output_(OutputOf(a, first.rank));
  auto proc = RankProcess::Start(setup);
  if (!proc.ok()) {
    return absl::InternalError(
        absl::StrCat("the integrations could not start: ", proc.status().message()));
  }
  spdlog::info("run {} attempt {}: running its integrations (pid {})", start.run_id(),
               start.resumption_index(), (*proc)->pid());
  const Key key{start.run_id(), start.resumption_index()};
  while (!(*proc)->Poll()) {
    bool cancelled;
    {
      absl::MutexLock lock(&mu_);
      auto it = attempts_.find(key);
      cancelled = it == attempts_.end() || it->second.cancelled;
    }
    if (cancelled) {
      (void)(*proc)->Stop(absl::Seconds(2), *clock_);
      return absl::CancelledError("stopped while its integrations ran");
    }
    clock_->SleepFor(absl::Milliseconds(50));
  }
  const ExitInfo exit = *(*proc)->exit();
  if (exit.exit_code == 0 && !exit.signaled()) return absl::OkStatus();
  on_rank_done_(OutputOf(a, first.rank));  // what it printed is shipped, and that is all
  const int index = exit.exit_code - kFirstIntegrationExit;
  if (index >= 0 && index < start.integrations_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("integration ", spec::DescribeIntegration(start.integrations(index)),
                     " failed (its output is in rank ", first.rank, "'s log)"));
  }
  return absl::FailedPreconditionError(absl::StrCat("the integrations failed: ", exit.ToString()));
}

std::optional<RankIdentity> AttemptManager::IdentityFor(const v1::StartAttempt& start) const {
  if (options_.per_user_uids && start.user_uid() > 0) {
    const auto id = static_cast<uid_t>(start.user_uid());
    return RankIdentity{start.user(), id, static_cast<gid_t>(id)};
  }
  return options_.rank_identity;
}

void AttemptManager::WallRendezvous(const std::optional<RankIdentity>& identity, Attempt& a) const {
  const v1::StartAttempt& start = a.start;
  if (!options_.walls || start.node_rank() != 0 || start.master_port() <= 0 || !identity) return;
  if (auto st = options_.walls->GuardPort(start.master_port(), identity->uid); !st.ok()) {
    spdlog::warn("run {}: its rendezvous port {} is not walled: {}", start.run_id(),
                 start.master_port(), std::string(st.message()));
    return;
  }
  a.rendezvous_owner = identity->uid;
}

void AttemptManager::ReleaseRendezvous(const Attempt& a) const {
  if (options_.walls && a.rendezvous_owner) {
    options_.walls->ReleasePort(a.start.master_port(), *a.rendezvous_owner);
  }
}

void AttemptManager::EndUnlaunched(const v1::StartAttempt& start, v1::AttemptUpdate u) {
  u.set_run_id(start.run_id());
  u.set_resumption_index(start.resumption_index());
  u.set_phase(v1::ATTEMPT_PHASE_START_FAILED);
  absl::MutexLock lock(&mu_);
  Attempt& a = attempts_[{start.run_id(), start.resumption_index()}];
  a.preparing = false;
  a.ended_at = clock_->Now();
  Queue(std::move(u));
}

void AttemptManager::CancelPreparing(Attempt& a) {
  a.cancelled = true;
  a.preparing = false;
  a.ended_at = clock_->Now();
  v1::AttemptUpdate u;
  u.set_run_id(a.start.run_id());
  u.set_resumption_index(a.start.resumption_index());
  u.set_phase(v1::ATTEMPT_PHASE_FINISHED);
  u.set_detail("stopped before its ranks started (while checked and prepared)");
  Queue(std::move(u));
}

}  // namespace tessera::worker
