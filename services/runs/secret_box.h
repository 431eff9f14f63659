#pragma once
// Encrypts secrets at rest: AES-256-GCM with the key the run manager is given
// (--secrets-key-file), a fresh random 96-bit nonce per value, and the secret's owner and name
// as associated data, so a sealed value moved to another user's or name's row does not open.
// Layout of a sealed value: version byte 1, nonce (12 bytes), ciphertext, tag (16 bytes).

#include <array>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::runs {

class SecretBox {
 public:
  static constexpr size_t kKeyBytes = 32;
  explicit SecretBox(const std::array<unsigned char, kKeyBytes>& key) : key_(key) {}
  ~SecretBox();
  SecretBox(const SecretBox&) = default;

  // The key in `path`: 32 bytes, as 64 hex digits (a newline may follow) or raw, in a file no
  // one but its owner may read. One error naming the flag.
  static absl::StatusOr<SecretBox> FromKeyFile(const std::string& path);

  absl::StatusOr<std::string> Seal(const std::string& plaintext,
                                   const std::string& associated) const;
  // DATA_LOSS when the value was not sealed with this key and these associated data.
  absl::StatusOr<std::string> Open(const std::string& sealed, const std::string& associated) const;

 private:
  std::array<unsigned char, kKeyBytes> key_;
};

}  // namespace tessera::runs
