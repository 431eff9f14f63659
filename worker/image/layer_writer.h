// Applies one image layer (an uncompressed tar stream) to a root folder, as the OCI image spec
// says: entries replace what lower layers left at their path, `.wh.NAME` deletes NAME, and
// `.wh..wh..opq` empties its folder of what lower layers put there.
//
// A layer is a stranger's file. Every path is resolved inside the root (openat2 with
// RESOLVE_IN_ROOT): a `..`, an absolute path or a symbolic link pointing out of the root can
// never make an entry land outside it. Ownership is not applied (ranks run as one uid), nor
// set-uid/set-gid bits, device nodes or extended attributes, as with `umoci unpack --rootless`.
// Folders stay writable while layers are applied; their modes are set by FinishRoot.
#pragma once

#include <map>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "worker/image/pull_guard.h"
#include "worker/image/tar_stream.h"

namespace tessera::worker::image {

// What is applied once every layer is: folder modes, deepest first.
struct RootFinish {
  std::map<std::string, uint32_t> dir_modes;  // cleaned relative path -> mode
};

class LayerWriter final : public TarHandler {
 public:
  // `root_fd`: an O_DIRECTORY descriptor of the root, kept open by the caller. `guard` (may be
  // null) is told of every file created and byte written.
  LayerWriter(int root_fd, RootFinish* finish, PullGuard* guard = nullptr)
      : root_fd_(root_fd), finish_(finish), guard_(guard) {}
  ~LayerWriter() override;

  absl::Status Begin(const TarEntry& entry) override;
  absl::Status Data(const char* data, size_t size) override;
  absl::Status End() override;

 private:
  // The folder holding `path` (with `create`, made with its parents where missing), opened
  // inside the root, and the last component.
  absl::Status OpenParent(const std::string& path, int* dir_fd, std::string* name,
                          bool create = true);
  absl::Status Whiteout(const std::string& parent, int dir_fd, const std::string& name);
  // A folder at `path` is gone: no mode is set on it, or on anything under it, at the end.
  void ForgetModes(const std::string& path);

  int root_fd_;
  RootFinish* finish_;
  PullGuard* guard_;
  int file_fd_ = -1;  // the file being written
  std::string file_path_;
  TarEntry entry_;
  std::set<std::string> created_;  // paths this layer made (an opaque whiteout spares them)
};

// Sets the folders' modes recorded while the layers were applied.
absl::Status FinishRoot(int root_fd, const RootFinish& finish);

// A layer path made relative and clean ("./a//b/" -> "a/b"; "/" -> ""). False for "..".
bool CleanLayerPath(const std::string& path, std::string* clean);

}  // namespace tessera::worker::image
