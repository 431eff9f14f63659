// ImageCache's pulls: the digest from the registry (skopeo inspect), the image into an OCI layout
// (skopeo copy), the layout into a bundle (umoci unpack), and what the tools' failures mean.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "worker/image/cache_files.h"
#include "worker/image/image_cache.h"

namespace tessera::worker::image {
namespace fs = std::filesystem;

namespace {

constexpr size_t kDigestPrefix = 7;  // "sha256:"

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

absl::StatusOr<std::string> ImageCache::ResolveDigest(const ImageReference& ref,
                                                      const std::string& pinned_digest,
                                                      const std::string& auth_file,
                                                      absl::Time deadline) {
  if (!pinned_digest.empty()) {
    if (!IsValidDigest(pinned_digest)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Invalid pinned digest \"", absl::CHexEscape(pinned_digest), "\" for image ",
                       ref.Name(), ": it must be \"sha256:\" and 64 lower-case hex digits"));
    }
    if (!ref.digest.empty() && ref.digest != pinned_digest) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Image reference ", ref.Name(), " names another digest than the pinned ", pinned_digest));
    }
    return pinned_digest;
  }
  if (!ref.digest.empty()) return ref.digest;  // already exact: nothing to ask the registry

  std::vector<std::string> argv = {"skopeo", "inspect", "--format", "{{.Digest}}"};
  if (IsInsecure(ref.registry)) argv.push_back("--tls-verify=false");
  if (!auth_file.empty()) argv.insert(argv.end(), {"--authfile", auth_file});
  argv.push_back(ref.DockerTransport());
  TESSERA_ASSIGN_OR_RETURN(const ToolResult result, RunTool(ref, argv, deadline));
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

absl::StatusOr<ToolResult> ImageCache::RunTool(const ImageReference& ref,
                                               const std::vector<std::string>& argv,
                                               absl::Time deadline) {
  const absl::Duration left = deadline - clock_->Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError(absl::StrCat("Cannot pull image ", ref.Name(), " within ",
                                                    absl::FormatDuration(options_.pull_timeout)));
  }
  absl::StatusOr<ToolResult> result = runner_->Run(argv, left);
  if (!result.ok()) {
    return absl::Status(result.status().code(), absl::StrCat("Cannot pull image ", ref.Name(), ": ",
                                                             result.status().message()));
  }
  return result;
}

absl::Status ImageCache::PullAndUnpack(const ImageReference& ref, const std::string& digest,
                                       const std::string& auth_file, absl::Time deadline) {
  const std::string hex = digest.substr(kDigestPrefix);
  const std::string layout = absl::StrCat(options_.dir, "/tmp/", hex, "-", RandomSuffix());
  const std::string bundle = layout + "-bundle";
  const auto clean_up = [&] {
    RemoveTree(layout);
    RemoveTree(bundle);
  };
  ImageReference exact = ref;
  exact.digest = digest;  // copy exactly what was resolved, even if the tag moved since

  std::vector<std::string> copy = {"skopeo", "copy"};
  if (IsInsecure(ref.registry)) copy.push_back("--src-tls-verify=false");
  if (!auth_file.empty()) copy.insert(copy.end(), {"--src-authfile", auth_file});
  copy.insert(copy.end(), {exact.DockerTransport(), absl::StrCat("oci:", layout, ":img")});
  absl::StatusOr<ToolResult> result = RunTool(ref, copy, deadline);
  if (result.ok() && result->exit_code != 0) result = SkopeoFailure(ref.Name(), *result);
  if (!result.ok()) {
    clean_up();
    return result.status();
  }

  result =
      RunTool(ref, {"umoci", "unpack", "--rootless", "--image", layout + ":img", bundle}, deadline);
  if (result.ok() && result->exit_code != 0) {
    result = absl::InternalError(
        absl::StrCat("Cannot unpack image ", ref.Name(), ": ", LastLine(result->output)));
  }
  if (!result.ok()) {
    clean_up();
    return result.status();
  }

  const int64_t bytes = TreeBytes(bundle);
  absl::Status st = WriteNumberFile(bundle + "/tessera-size", bytes);
  st.Update(WriteNumberFile(bundle + "/tessera-last-used", absl::ToUnixNanos(clock_->Now())));
  // The rename is what makes the image appear, whole, in bundles/.
  if (st.ok() && std::rename(bundle.c_str(), BundlePath(hex).c_str()) != 0) {
    const int err = errno;
    if (!fs::is_directory(BundlePath(hex))) {  // there already (another process): also fine
      st = absl::InternalError(absl::StrCat("Cannot move the unpacked image ", ref.Name(), " to ",
                                            BundlePath(hex), ": ", std::strerror(err)));
    }
  }
  clean_up();
  if (!st.ok()) return st;
  spdlog::info("image cache: pulled {} ({}), {} bytes unpacked", ref.Name(), digest, bytes);
  return absl::OkStatus();
}

}  // namespace tessera::worker::image
