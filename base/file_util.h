#pragma once
// Whole files: read at once, and written durably (datasets, checkpoints, a node's credentials): a
// file is written under a temporary name, flushed to disk, renamed into place and its folder
// flushed, so that a crash (or a reader at the wrong moment) sees the old file or the whole new
// one, never a part.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Writes `bytes` to `path` atomically and durably (temporary file, fsync, rename, fsync folder),
// created with `mode` (less the umask): 0600 for a secret.
absl::Status WriteFileDurably(const std::string& path, std::string_view bytes, int mode = 0644);

// fsync of a folder, so that a rename in it survives a crash.
absl::Status SyncFolder(const std::string& folder);

// Creates a folder and its parents; an existing folder is fine.
absl::Status MakeFolders(const std::string& folder);

}  // namespace tessera
