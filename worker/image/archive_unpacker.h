// Unpacks an image from the docker-archive stream `skopeo copy` writes (a tar holding each
// layer, uncompressed, as "<diff id>.tar", then the config and manifest.json) into a root
// folder, while skopeo is still downloading: each layer is applied as its bytes arrive. Layers
// must be applied in the image's order (its config's rootfs.diff_ids); one that arrives early
// (skopeo copies layers in parallel) waits in a spool file for its turn.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/image/layer_writer.h"
#include "worker/image/tar_stream.h"

namespace tessera::worker::image {

class ArchiveUnpacker final : public TarHandler {
 public:
  // `diff_ids`: "sha256:<hex>" of each layer, lowest first. `spool_dir`: where early layers wait.
  // `guard` (may be null): told of every byte spooled and every file and byte unpacked.
  ArchiveUnpacker(int root_fd, std::vector<std::string> diff_ids, std::string spool_dir,
                  PullGuard* guard = nullptr);
  ~ArchiveUnpacker() override;

  absl::Status Begin(const TarEntry& entry) override;
  absl::Status Data(const char* data, size_t size) override;
  absl::Status End() override;

  // The stream ended: applies what waits, checks that every layer came, sets folder modes.
  absl::Status Finish();

 private:
  absl::Status ApplySpooled();
  absl::Status ApplyFile(const std::string& path);

  int root_fd_;
  std::vector<std::string> hexes_;  // diff ids without "sha256:"
  std::string spool_dir_;
  PullGuard* guard_;
  size_t next_ = 0;  // the index of the layer to apply next
  RootFinish finish_;
  // The entry being read: a layer applied now (layer_), one spooled (spool_fd_), or skipped.
  std::unique_ptr<LayerWriter> writer_;
  std::unique_ptr<TarStreamReader> layer_;
  int spool_fd_ = -1;
  std::vector<std::string> spooled_;  // hexes waiting in spool_dir_
};

}  // namespace tessera::worker::image
