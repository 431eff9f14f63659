// One layer blob applied to a root folder as its bytes arrive: inflated when compressed, its
// uncompressed stream checked against the layer's diff id, and its tar entries applied
// (layer_writer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "worker/image/blob_stream.h"
#include "worker/image/image_manifest.h"
#include "worker/image/layer_writer.h"
#include "worker/image/tar_stream.h"

namespace tessera::worker::image {

class LayerApplier {
 public:
  // `compression` must not be kUnsupported. `diff_id`: "sha256:<hex>" of the uncompressed tar.
  // `max_bytes`: the most uncompressed bytes it may write (a gzip bomb stops there,
  // RESOURCE_EXHAUSTED); -1: no limit. `guard` (may be null): told of what the layer writes.
  LayerApplier(int root_fd, RootFinish* finish, LayerCompression compression, std::string diff_id,
               int64_t max_bytes = -1, PullGuard* guard = nullptr);

  // The next bytes of the blob (compressed, as the registry serves it).
  absl::Status Feed(const char* data, size_t size);
  // The blob ended: the tar must have ended and the diff id match (DATA_LOSS otherwise).
  absl::Status Finish();

  // Uncompressed bytes applied so far.
  int64_t bytes() const { return bytes_; }

  // Applies the blob stored in the file at `path`, whole.
  absl::Status ApplyFile(const std::string& path);

 private:
  absl::Status FeedTar(const char* data, size_t size);

  LayerWriter writer_;
  TarStreamReader tar_;
  Sha256Stream diff_;
  std::string diff_id_;
  std::unique_ptr<GzipInflater> gzip_;
  int64_t max_bytes_;
  int64_t bytes_ = 0;
};

}  // namespace tessera::worker::image
