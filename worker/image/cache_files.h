#pragma once
// The image cache's file work: sizing and deleting unpacked root file systems, names and small
// number files, and reading what a bundle's config.json says about the image's process.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::worker::image {

// The sum of the lstat sizes of `path` and everything under it (symbolic links not followed).
int64_t TreeBytes(const std::string& path);

// Deletes `path` and everything under it, also inside read-only folders (images have 0555 ones,
// whose entries cannot be deleted as they are). Logs what could not be deleted; false then.
bool RemoveTree(const std::string& path);

// Creates `path` with mode 0700 (less the umask) if missing, and its parents as needed.
absl::Status MakePrivateFolder(const std::string& path);

// Like MakePrivateFolder, but others may pass through it (0711) without listing it: the image
// folders on the way to an unpacked root, which ranks running as other users read.
absl::Status MakePassThroughFolder(const std::string& path);

// 8 random hex digits, for names in tmp/ that no other pull or eviction uses.
std::string RandomSuffix();

// A file holding one decimal number; nullopt when missing or not a number.
std::optional<int64_t> ReadNumberFile(const std::string& path);
absl::Status WriteNumberFile(const std::string& path, int64_t value);

// What the image's config says about the process, as umoci wrote it into the runtime spec.
struct ProcessConfig {
  std::vector<std::string> env;  // "KEY=VALUE"
  std::string cwd = "/";
};
// Reads config.json of the bundle at `bundle`. INTERNAL when it is missing or malformed.
absl::StatusOr<ProcessConfig> ReadProcessConfig(const std::string& bundle);

}  // namespace tessera::worker::image
