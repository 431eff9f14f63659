#include "worker/image/archive_unpacker.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/image/file_stream.h"

namespace tessera::worker::image {
namespace {

std::string SpoolPath(const std::string& dir, const std::string& hex) {
  return absl::StrCat(dir, "/", hex, ".tar");
}

// A layer that does not apply is the image's fault (INVALID_ARGUMENT), unless the node's limits
// stopped it (RESOURCE_EXHAUSTED, whose message already says which).
absl::Status LayerError(size_t layer, const absl::Status& st) {
  if (IsPullLimitError(st)) return st;
  return absl::InvalidArgumentError(absl::StrCat("layer ", layer, ": ", st.message()));
}

}  // namespace

ArchiveUnpacker::ArchiveUnpacker(int root_fd, std::vector<std::string> diff_ids,
                                 std::string spool_dir, PullGuard* guard)
    : root_fd_(root_fd), spool_dir_(std::move(spool_dir)), guard_(guard) {
  for (auto& id : diff_ids) {
    hexes_.push_back(absl::StartsWith(id, "sha256:") ? id.substr(7) : id);
  }
}

ArchiveUnpacker::~ArchiveUnpacker() {
  if (spool_fd_ >= 0) ::close(spool_fd_);
  for (const auto& hex : spooled_) ::unlink(SpoolPath(spool_dir_, hex).c_str());
}

absl::Status ArchiveUnpacker::Begin(const TarEntry& entry) {
  if (entry.type != TarEntry::Type::kFile || !absl::EndsWith(entry.path, ".tar")) {
    return absl::OkStatus();  // the config, manifest.json: the caller has them already
  }
  const std::string hex = entry.path.substr(0, entry.path.size() - 4);
  const size_t uses = std::count(hexes_.begin(), hexes_.end(), hex);
  if (uses == 0 || std::count(spooled_.begin(), spooled_.end(), hex) > 0) {
    return absl::OkStatus();  // not a layer of this image, or one seen already
  }
  if (next_ < hexes_.size() && hexes_[next_] == hex && uses == 1) {
    writer_ = std::make_unique<LayerWriter>(root_fd_, &finish_, guard_);
    layer_ = std::make_unique<TarStreamReader>(writer_.get());
    return absl::OkStatus();
  }
  // Early, or used more than once (identical layers): kept until its turn(s).
  const std::string path = SpoolPath(spool_dir_, hex);
  spool_fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (spool_fd_ < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  spooled_.push_back(hex);
  return absl::OkStatus();
}

absl::Status ArchiveUnpacker::Data(const char* data, size_t size) {
  if (layer_) return layer_->Feed(data, size);
  if (spool_fd_ < 0) return absl::OkStatus();
  if (guard_ != nullptr) {
    if (absl::Status st = guard_->Wrote(static_cast<int64_t>(size)); !st.ok()) return st;
  }
  return WriteAll(spool_fd_, data, size);
}

absl::Status ArchiveUnpacker::End() {
  if (layer_) {
    absl::Status st = layer_->Finish();
    layer_.reset();
    writer_.reset();
    if (!st.ok()) return LayerError(next_, st);
    ++next_;
  }
  if (spool_fd_ >= 0) {
    ::close(spool_fd_);
    spool_fd_ = -1;
  }
  return ApplySpooled();
}

absl::Status ArchiveUnpacker::ApplySpooled() {
  while (next_ < hexes_.size() && std::count(spooled_.begin(), spooled_.end(), hexes_[next_]) > 0) {
    if (absl::Status st = ApplyFile(SpoolPath(spool_dir_, hexes_[next_])); !st.ok()) {
      return LayerError(next_, st);
    }
    ++next_;
  }
  return absl::OkStatus();
}

absl::Status ArchiveUnpacker::ApplyFile(const std::string& path) {
  LayerWriter writer(root_fd_, &finish_, guard_);
  TarStreamReader reader(&writer);
  absl::Status st =
      StreamFile(path, [&](const char* data, size_t size) { return reader.Feed(data, size); });
  return st.ok() ? reader.Finish() : st;
}

absl::Status ArchiveUnpacker::Finish() {
  if (layer_) return absl::InvalidArgumentError("the image archive ended inside a layer");
  if (absl::Status st = ApplySpooled(); !st.ok()) return st;
  if (next_ < hexes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the image archive lacks layer ", next_, " (sha256:", hexes_[next_], ")"));
  }
  return FinishRoot(root_fd_, finish_);
}

}  // namespace tessera::worker::image
