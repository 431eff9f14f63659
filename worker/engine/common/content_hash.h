#pragma once
// Content hashes for dataset shards and checkpoint shards: XXH3-128 (libxxhash), fast enough to
// hash every byte as it is written without slowing a save, printed as 32 hex digits.

#include <xxhash.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera::engine {

// Hashes a stream of bytes fed in pieces.
class ContentHasher {
 public:
  ContentHasher();
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;
  void Update(const void* data, size_t size);
  // The hash of everything fed so far, as 32 lowercase hex digits.
  std::string HexDigest() const;

 private:
  XXH3_state_t* state_;
};

std::string HashBytes(std::string_view bytes);

// Reads a whole file and hashes it; errors name the path.
absl::StatusOr<std::string> HashFile(const std::string& path);

}  // namespace tessera::engine
