#include "worker/image/pull_guard.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace tessera::worker::image {

namespace {
constexpr char kPullLimitPayload[] = "tessera.dev/pull-limit";
}  // namespace

absl::Status PullLimitError(const std::string& message) {
  absl::Status st = absl::ResourceExhaustedError(message);
  st.SetPayload(kPullLimitPayload, absl::Cord("1"));
  return st;
}

bool IsPullLimitError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kResourceExhausted &&
         status.GetPayload(kPullLimitPayload).has_value();
}

absl::StatusOr<DiskSpace> StatDiskSpace(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0) {
    return absl::InternalError(absl::StrCat("statvfs ", dir, ": ", std::strerror(errno)));
  }
  DiskSpace space;
  space.free_bytes = static_cast<int64_t>(s.f_bavail) * static_cast<int64_t>(s.f_frsize);
  // A file system with no inode table (btrfs, tmpfs without nr_inodes) reports 0 files in all.
  space.free_inodes = s.f_files == 0 ? INT64_MAX : static_cast<int64_t>(s.f_favail);
  return space;
}

PullGuard::PullGuard(std::string image, std::string dir, PullLimits limits, DiskSpaceProbe probe)
    : image_(std::move(image)), dir_(std::move(dir)), limits_(limits), probe_(std::move(probe)) {}

absl::Status PullGuard::CheckDeclared(int64_t declared_bytes) {
  // Compression can only grow incompressible data by a little (gzip: 5 bytes per 16 KiB block);
  // a compressed image more than that above the cache's size can never unpack into it.
  const int64_t most = limits_.max_image_bytes + limits_.max_image_bytes / 64 + (1 << 20);
  if (declared_bytes > most) {
    return PullLimitError(absl::StrCat("Image ", image_, " declares layers of ", declared_bytes,
                                       " bytes, more than the node's image cache holds (",
                                       limits_.max_image_bytes, " bytes, --image-cache-size)"));
  }
  auto space = probe_(dir_);
  if (!space.ok()) return space.status();
  if (space->free_bytes - declared_bytes < limits_.min_free_bytes) {
    return PullLimitError(absl::StrCat("Image ", image_, " declares layers of ", declared_bytes,
                                       " bytes; the node's disk (", dir_, ") has ",
                                       space->free_bytes, " bytes free and keeps ",
                                       limits_.min_free_bytes, " of them (--image-min-free-disk)"));
  }
  return absl::OkStatus();
}

absl::Status PullGuard::Wrote(int64_t bytes) {
  const int64_t before = unprobed_bytes_.fetch_add(bytes);
  if (before + bytes < kProbeEveryBytes) return absl::OkStatus();
  unprobed_bytes_ -= before + bytes;  // whichever thread crossed the mark probes
  return CheckDisk();
}

absl::Status PullGuard::AddedFile() {
  const int64_t files = ++files_;
  if (files > limits_.max_files) {
    return PullLimitError(
        absl::StrCat("Image ", image_, " has more than ", limits_.max_files,
                     " files, the most a node unpacks of one image (--image-max-files)"));
  }
  return files % kProbeEveryFiles == 0 ? CheckDisk() : absl::OkStatus();
}

absl::Status PullGuard::CheckDisk() {
  auto space = probe_(dir_);
  if (!space.ok()) return space.status();
  if (space->free_bytes < limits_.min_free_bytes) {
    return PullLimitError(absl::StrCat("Image ", image_, " was stopped: the node's disk (", dir_,
                                       ") is down to ", space->free_bytes,
                                       " bytes free, under the ", limits_.min_free_bytes,
                                       " it keeps (--image-min-free-disk)"));
  }
  if (space->free_inodes < limits_.min_free_inodes) {
    return PullLimitError(absl::StrCat("Image ", image_, " was stopped: the node's disk (", dir_,
                                       ") is down to ", space->free_inodes,
                                       " free inodes, under the ", limits_.min_free_inodes,
                                       " it keeps (--image-min-free-inodes)"));
  }
  return absl::OkStatus();
}

}  // namespace tessera::worker::image
