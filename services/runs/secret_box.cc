#include "services/runs/secret_box.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <sys/stat.h>

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/file_util.h"

namespace tessera::runs {
namespace {

constexpr unsigned char kVersion = 1;
constexpr int kNonceBytes = 12;
constexpr int kTagBytes = 16;

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

}  // namespace

SecretBox::~SecretBox() { OPENSSL_cleanse(key_.data(), key_.size()); }

absl::StatusOr<SecretBox> SecretBox::FromKeyFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--secrets-key-file: cannot read ", path));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--secrets-key-file: ", path,
                     " may be read by others (chmod 600 it): it unlocks every "
                     "user's secrets"));
  }
  auto text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--secrets-key-file: cannot read ", path));
  }
  std::string bytes;
  const std::string trimmed(absl::StripAsciiWhitespace(*text));
  if (trimmed.size() == 2 * kKeyBytes &&
      std::all_of(trimmed.begin(), trimmed.end(), [](char c) { return absl::ascii_isxdigit(c); })) {
    bytes = absl::HexStringToBytes(trimmed);
  } else if (text->size() == kKeyBytes) {
    bytes = *text;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--secrets-key-file: ", path,
                     " must hold a 32-byte key as 64 hex digits (openssl rand -hex 32)"));
  }
  std::array<unsigned char, kKeyBytes> key;
  std::copy(bytes.begin(), bytes.end(), key.begin());
  OPENSSL_cleanse(bytes.data(), bytes.size());
  return SecretBox(key);
}

absl::StatusOr<std::string> SecretBox::Seal(const std::string& plaintext,
                                            const std::string& associated) const {
  std::string out(1 + kNonceBytes + plaintext.size() + kTagBytes, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  bytes[0] = kVersion;
  if (RAND_bytes(bytes + 1, kNonceBytes) != 1) return absl::InternalError("RAND_bytes failed");
  CipherContext ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int len = 0;
  if (!ctx ||
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), bytes + 1) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(associated.data()),
                        static_cast<int>(associated.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), bytes + 1 + kNonceBytes, &len,
                        reinterpret_cast<const unsigned char*>(plaintext.data()),
                        static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), bytes + 1 + kNonceBytes + len, &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes,
                          bytes + 1 + kNonceBytes + plaintext.size()) != 1) {
    return absl::InternalError("sealing a secret failed");
  }
  return out;
}

absl::StatusOr<std::string> SecretBox::Open(const std::string& sealed,
                                            const std::string& associated) const {
  if (sealed.size() < 1 + kNonceBytes + kTagBytes || sealed[0] != static_cast<char>(kVersion)) {
    return absl::DataLossError("a sealed secret is malformed");
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(sealed.data());
  const size_t n = sealed.size() - 1 - kNonceBytes - kTagBytes;
  std::string out(n, '\0');
  CipherContext ctx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free);
  int len = 0;
  std::array<unsigned char, kTagBytes> tag;
  std::copy(bytes + 1 + kNonceBytes + n, bytes + sealed.size(), tag.begin());
  if (!ctx ||
      EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), bytes + 1) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len,
                        reinterpret_cast<const unsigned char*>(associated.data()),
                        static_cast<int>(associated.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &len,
                        bytes + 1 + kNonceBytes, static_cast<int>(n)) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) != 1 ||
      EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(out.data()) + len, &len) !=
          1) {
    OPENSSL_cleanse(out.data(), out.size());
    return absl::DataLossError(
        "a secret does not open with this key (was --secrets-key-file changed?)");
  }
  return out;
}

}  // namespace tessera::runs
