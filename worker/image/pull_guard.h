#pragma once
// What one image pull may take of the node's disk, counted from what arrives, never from what the
// image's manifest claims: a stranger's registry can declare small layers and stream more, or
// declare huge ones, or send millions of empty files. Every byte the pull writes (spooled layers
// and the unpacked root) and every file it creates is told to a PullGuard, which stops the pull
// once the image has more files than the node allows, or once the disk of the cache would keep
// less free space or fewer free inodes than the reserve the worker keeps for everything else
// (checkpoints, logs, other images). Thread-safe: layers download in parallel.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::worker::image {

// A pull stopped by one of the node's limits: RESOURCE_EXHAUSTED, its message naming the image
// and the flag, marked so that the layers of code it passes through return it as it is.
absl::Status PullLimitError(const std::string& message);
bool IsPullLimitError(const absl::Status& status);

struct DiskSpace {
  int64_t free_bytes = 0;   // available to an unprivileged writer
  int64_t free_inodes = 0;  // likewise; a file system without an inode limit reports a large count
};

// The free space of the file system holding `dir`.
using DiskSpaceProbe = std::function<absl::StatusOr<DiskSpace>(const std::string& dir)>;
absl::StatusOr<DiskSpace> StatDiskSpace(const std::string& dir);  // statvfs

struct PullLimits {
  int64_t max_image_bytes = 50LL << 30;  // the cache's size (--image-cache-size)
  int64_t max_files = 2'000'000;         // files of one image (--image-max-files)
  int64_t min_free_bytes = 1LL << 30;    // the disk keeps this much free (--image-min-free-disk)
  int64_t min_free_inodes = 50'000;      // and this many inodes (--image-min-free-inodes)
};

class PullGuard {
 public:
  // `image`: its name, for errors. `dir`: a folder on the disk the pull writes to.
  PullGuard(std::string image, std::string dir, PullLimits limits,
            DiskSpaceProbe probe = StatDiskSpace);

  // Before any layer downloads: `declared_bytes`, the sum of the layers' sizes as the manifest
  // gives them (compressed), must fit in the cache and on the disk above the reserve.
  absl::Status CheckDeclared(int64_t declared_bytes);
  // `bytes` more were written; the disk is looked at again every kProbeEveryBytes.
  absl::Status Wrote(int64_t bytes);
  // One more file, folder or link in the image's root; past max_files the pull stops, and the
  // disk's inodes are looked at again every kProbeEveryFiles.
  absl::Status AddedFile();
  // Looks at the disk now (also for a tool writing where the guard does not see its bytes).
  absl::Status CheckDisk();

  static constexpr int64_t kProbeEveryBytes = 16LL << 20;
  static constexpr int64_t kProbeEveryFiles = 1024;

 private:
  const std::string image_;
  const std::string dir_;
  const PullLimits limits_;
  const DiskSpaceProbe probe_;
  std::atomic<int64_t> unprobed_bytes_{0};
  std::atomic<int64_t> files_{0};
};

}  // namespace tessera::worker::image
