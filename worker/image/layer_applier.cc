#include "worker/image/layer_applier.h"

#include "absl/strings/str_cat.h"

namespace tessera::worker::image {

LayerApplier::LayerApplier(int root_fd, RootFinish* finish, LayerCompression compression,
                           std::string diff_id, int64_t max_bytes, PullGuard* guard)
    : writer_(root_fd, finish, guard),
      tar_(&writer_),
      diff_id_(std::move(diff_id)),
      max_bytes_(max_bytes) {
  if (compression == LayerCompression::kGzip) {
    gzip_ = std::make_unique<GzipInflater>(
        [this](const char* data, size_t size) { return FeedTar(data, size); });
  }
}

absl::Status LayerApplier::FeedTar(const char* data, size_t size) {
  bytes_ += static_cast<int64_t>(size);
  if (max_bytes_ >= 0 && bytes_ > max_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the layer unpacks to more than the ", max_bytes_, " bytes left for it"));
  }
  diff_.Update(data, size);
  return tar_.Feed(data, size);
}

absl::Status LayerApplier::Feed(const char* data, size_t size) {
  return gzip_ != nullptr ? gzip_->Feed(data, size) : FeedTar(data, size);
}

absl::Status LayerApplier::Finish() {
  if (gzip_ != nullptr) {
    if (absl::Status st = gzip_->Finish(); !st.ok()) return st;
  }
  // Whatever follows the end-of-archive blocks counts in the diff id, as the tar's own bytes.
  if (absl::Status st = tar_.Finish(); !st.ok()) return st;
  const std::string got = diff_.Digest();
  if (got != diff_id_) {
    return absl::DataLossError(
        absl::StrCat("the layer's uncompressed digest is ", got, ", not its diff id ", diff_id_));
  }
  return absl::OkStatus();
}

absl::Status LayerApplier::ApplyFile(const std::string& path) {
  absl::Status st =
      StreamFile(path, [this](const char* data, size_t size) { return Feed(data, size); });
  return st.ok() ? Finish() : st;
}

}  // namespace tessera::worker::image
