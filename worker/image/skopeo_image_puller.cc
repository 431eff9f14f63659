#include "worker/image/skopeo_image_puller.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "worker/image/archive_unpacker.h"
#include "worker/image/cache_files.h"

namespace tessera::worker::image {

namespace {

bool Contains(const std::string& lower, std::initializer_list<const char*> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](const char* n) { return absl::StrContains(lower, n); });
}

// skopeo says what went wrong only in words (its exit code is 1 for everything); these are the
// words of containers/image and of Go's network errors.
absl::Status SkopeoFailure(const std::string& name, const ToolResult& result) {
  std::string lower = absl::AsciiStrToLower(result.output);
  // A local file skopeo cannot write (EACCES) is no registry's refusal.
  absl::StrReplaceAll({{"permission denied", "local access error"}}, &lower);
  const std::string last = LastLine(result.output);
  if (Contains(lower, {"manifest unknown", "name unknown", "not found"})) {
    return absl::NotFoundError(absl::StrCat("Image not found: ", name, ": ", last));
  }
  if (Contains(lower, {"unauthorized", "authentication required", "denied"})) {
    return absl::PermissionDeniedError(
        absl::StrCat("Not allowed to pull image ", name, ": ", last));
  }
  if (Contains(lower, {"connection refused", "no such host", "timeout", "i/o timeout",
                       "server gave http response to https client"})) {
    return absl::UnavailableError(absl::StrCat("Cannot reach the registry of ", name, ": ", last));
  }
  return absl::UnknownError(absl::StrCat("Cannot pull image ", name, ": skopeo exited with status ",
                                         result.exit_code, ": ", last));
}

}  // namespace

SkopeoImagePuller::SkopeoImagePuller(PullSettings settings, std::shared_ptr<ToolRunner> runner,
                                     std::shared_ptr<Clock> clock)
    : settings_(std::move(settings)), runner_(std::move(runner)), clock_(std::move(clock)) {}

absl::StatusOr<std::string> SkopeoImagePuller::ResolveDigest(const ImageReference& ref,
                                                             const std::string& auth_file,
                                                             absl::Time deadline) const {
  TESSERA_ASSIGN_OR_RETURN(
      const ToolResult result,
      RunTool(ref, InspectCommand({"--format", "{{.Digest}}"}, ref, auth_file), deadline));
  if (result.exit_code != 0) return SkopeoFailure(ref.Name(), result);
  // The digest is the last line: skopeo may print warnings (on stderr, merged) before it.
  const std::string digest = LastLine(result.output);
  if (!IsValidDigest(digest)) {
    return absl::InternalError(absl::StrCat("skopeo inspect gave no valid digest for image ",
                                            ref.Name(), ": \"",
                                            absl::CHexEscape(digest.substr(0, 200)), "\""));
  }
  return digest;
}

std::vector<std::string> SkopeoImagePuller::InspectCommand(std::initializer_list<std::string> what,
                                                           const ImageReference& ref,
                                                           const std::string& auth_file) const {
  std::vector<std::string> argv = {"skopeo", "inspect"};
  argv.insert(argv.end(), what);
  if (settings_.IsInsecure(ref.registry)) argv.push_back("--tls-verify=false");
  if (!auth_file.empty()) argv.insert(argv.end(), {"--authfile", auth_file});
  argv.push_back(ref.DockerTransport());
  return argv;
}

absl::StatusOr<ToolResult> SkopeoImagePuller::RunTool(
    const ImageReference& ref, const std::vector<std::string>& argv, absl::Time deadline,
    const std::function<absl::Status()>& keep_going) const {
  const absl::Duration left = deadline - clock_->Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(absl::StrCat("Cannot pull image ", ref.Name(), " within ",
                                                    absl::FormatDuration(settings_.pull_timeout)));
  }
  absl::StatusOr<ToolResult> result = runner_->RunWatched(argv, left, keep_going);
  // The node's limits stopped it: that message already names the image and the limit.
  if (IsPullLimitError(result.status())) return result;
  if (!result.ok()) {
    return absl::Status(result.status().code(), absl::StrCat("Cannot pull image ", ref.Name(), ": ",
                                                             result.status().message()));
  }
  return result;
}

absl::Status SkopeoImagePuller::Pull(const ImagePull& pull) const {
  const ImageReference& ref = pull.ref;
  // skopeo reports no sizes before it writes: the disk is looked at before it starts and while
  // it runs (StreamIntoRoot).
  TESSERA_RETURN_IF_ERROR(pull.guard->CheckDisk());
  // The image's config first: its environment and working folder, and its layers' order.
  TESSERA_ASSIGN_OR_RETURN(
      const ToolResult inspected,
      RunTool(ref, InspectCommand({"--config", "--raw"}, pull.exact, pull.auth_file),
              pull.deadline));
  if (inspected.exit_code != 0) return SkopeoFailure(ref.Name(), inspected);
  absl::StatusOr<ImageConfig> config = ParseImageConfig(inspected.output);
  if (!config.ok()) {
    return absl::InternalError(
        absl::StrCat("Cannot unpack image ", ref.Name(), ": ", config.status().message()));
  }
  TESSERA_RETURN_IF_ERROR(
      WriteFileDurably(pull.bundle + "/config.json", BundleConfigJson(*config)));
  return StreamIntoRoot(pull, *config);
}

absl::Status SkopeoImagePuller::StreamIntoRoot(const ImagePull& pull,
                                               const ImageConfig& config) const {
  const ImageReference& ref = pull.ref;
  const std::string& work = pull.work;
  const std::string rootfs = pull.bundle + "/rootfs";
  const absl::Time deadline = pull.deadline;
  PullGuard* guard = pull.guard;
  // skopeo writes the image as a docker-archive into a pipe, layers uncompressed and verified
  // against their digests as they come; each is applied to the root as it arrives, so the
  // image is unpacked by the time it is downloaded.
  const std::string fifo = work + "/archive.pipe";
  if (::mkfifo(fifo.c_str(), 0600) != 0) {
    return absl::InternalError(absl::StrCat("Cannot pull image ", ref.Name(), ": mkfifo ", fifo,
                                            ": ", std::strerror(errno)));
  }
  // Our own write end keeps the reader from seeing an end before skopeo has opened the pipe; it
  // is closed once skopeo has exited, whatever happened, so the reader always sees the end.
  const int read_fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  const int hold_fd = read_fd < 0 ? -1 : ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
  if (read_fd < 0 || hold_fd < 0 ||
      ::fcntl(read_fd, F_SETFL, ::fcntl(read_fd, F_GETFL) & ~O_NONBLOCK) != 0) {
    const int err = errno;
    if (read_fd >= 0) ::close(read_fd);
    if (hold_fd >= 0) ::close(hold_fd);
    return absl::InternalError(
        absl::StrCat("Cannot pull image ", ref.Name(), ": ", fifo, ": ", std::strerror(err)));
  }
  // A larger pipe: fewer switches between skopeo and this thread (best effort; 1 MiB is the
  // default most a user may ask for).
  ::fcntl(read_fd, F_SETPIPE_SZ, 1 << 20);
  const int root_fd = ::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  // skopeo stages each uncompressed layer before writing it (a tar header needs its size): on the
  // cache's disk, in the pull's own folder, not in /var/tmp, which may be small.
  std::vector<std::string> copy = {"skopeo", "--tmpdir", work, "copy"};
  if (settings_.IsInsecure(ref.registry)) copy.push_back("--src-tls-verify=false");
  if (!pull.auth_file.empty()) copy.insert(copy.end(), {"--src-authfile", pull.auth_file});
  copy.insert(copy.end(), {pull.exact.DockerTransport(), "docker-archive:" + fifo});
  absl::StatusOr<ToolResult> copied = absl::UnknownError("not run");
  // skopeo stages a whole layer in `work` before it writes any of it to the pipe: its bytes are
  // watched on the disk while it runs, not only as they arrive here.
  std::thread copier([&] {
    copied = RunTool(ref, copy, deadline, [guard] { return guard->CheckDisk(); });
    ::close(hold_fd);
  });

  ArchiveUnpacker unpacker(root_fd, config.diff_ids, work, guard);
  TarStreamReader archive(&unpacker);
  absl::Status unpacked =
      root_fd < 0 ? absl::InternalError(absl::StrCat("open ", rootfs, ": ", std::strerror(errno)))
                  : absl::OkStatus();
  std::string buffer(1 << 20, '\0');
  // The archive holds the layers uncompressed, each once, and a config and manifest of a few KiB.
  const int64_t most_archive_bytes = settings_.max_bytes + (1 << 20);
  int64_t archive_bytes = 0;
  while (unpacked.ok()) {
    const ssize_t n = ::read(read_fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) unpacked = absl::InternalError(absl::StrCat("read: ", std::strerror(errno)));
    if (n <= 0) break;
    archive_bytes += n;
    if (archive_bytes > most_archive_bytes) {
      unpacked = PullLimitError(absl::StrCat("Image ", ref.Name(),
                                             " is larger than the node's image cache (",
                                             settings_.max_bytes, " bytes, --image-cache-size)"));
      break;
    }
    unpacked = archive.Feed(buffer.data(), static_cast<size_t>(n));
  }
  // Stopped early (a bad layer): closing the pipe makes skopeo's next write fail, so it ends.
  ::close(read_fd);
  copier.join();
  if (unpacked.ok()) unpacked = archive.Finish();
  if (unpacked.ok()) unpacked = unpacker.Finish();
  if (root_fd >= 0) ::close(root_fd);
  // The node's limits stopped the pull; otherwise skopeo's failure (the registry's, a digest
  // mismatch) explains a cut stream best.
  if (IsPullLimitError(unpacked)) return unpacked;
  if (!copied.ok()) return copied.status();
  if (copied->exit_code != 0) return SkopeoFailure(ref.Name(), *copied);
  if (!unpacked.ok()) {
    return absl::InternalError(
        absl::StrCat("Cannot unpack image ", ref.Name(), ": ", unpacked.message()));
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker::image
