#include "services/common/auth/api_keys.h"

#include <openssl/evp.h>

#include "absl/random/distributions.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tessera::auth {
namespace {

constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
constexpr size_t kMaxCacheEntries = 10'000;

std::string RandomString(absl::BitGenRef gen, int length) {
  std::string out;
  out.reserve(length);
  for (int i = 0; i < length; ++i) {
    out.push_back(kAlphabet[absl::Uniform<size_t>(gen, 0, sizeof(kAlphabet) - 1)]);
  }
  return out;
}

}  // namespace

std::string HashSecret(const std::string& secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(secret.data(), secret.size(), digest, &length, EVP_sha256(), nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

std::string NewSecret(absl::BitGenRef gen) { return "tsk_" + RandomString(gen, 40); }

std::string NewKeyId(absl::BitGenRef gen) { return "key-" + RandomString(gen, 12); }

absl::StatusOr<std::string> BearerToken(const std::string& header_value) {
  if (header_value.empty()) {
    return absl::UnauthenticatedError(
        "missing API key: send the header 'authorization: Bearer KEY' (mcli set api-key KEY)");
  }
  const auto space = header_value.find(' ');
  if (space == std::string::npos ||
      absl::AsciiStrToLower(header_value.substr(0, space)) != "bearer") {
    return absl::UnauthenticatedError("malformed authorization header: expected 'Bearer KEY'");
  }
  std::string token(absl::StripAsciiWhitespace(header_value.substr(space + 1)));
  if (token.empty()) return absl::UnauthenticatedError("empty API key in the authorization header");
  return token;
}

Authenticator::Authenticator(std::shared_ptr<store::ApiKeyStore> keys, std::shared_ptr<Clock> clock,
                             absl::Duration cache_ttl)
    : keys_(std::move(keys)), clock_(std::move(clock)), cache_ttl_(cache_ttl) {}

absl::StatusOr<Principal> Authenticator::Authenticate(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  std::string value;
  if (it != metadata.end()) value.assign(it->second.data(), it->second.size());
  return Authenticate(value);
}

absl::StatusOr<Principal> Authenticator::Authenticate(const std::string& authorization_header) {
  auto token = BearerToken(authorization_header);
  if (!token.ok()) return token.status();
  const std::string hash = HashSecret(*token);
  const absl::Time now = clock_->Now();
  {
    absl::MutexLock lock(&mu_);
    auto hit = cache_.find(hash);
    if (hit != cache_.end() && hit->second.expires > now) return hit->second.principal;
  }
  auto record = keys_->FindByHash(hash);
  absl::StatusOr<Principal> result;
  if (absl::IsNotFound(record.status())) {
    result = absl::UnauthenticatedError("invalid API key");
  } else if (!record.ok()) {
    return record.status();  // not cached: the store may come back
  } else if (record->key.revoked()) {
    result = absl::UnauthenticatedError(absl::StrCat("API key ", record->key.id(), " was revoked"));
  } else {
    result = Principal{record->key.user(), record->key.role()};
  }
  absl::MutexLock lock(&mu_);
  if (cache_.size() >= kMaxCacheEntries) cache_.clear();
  cache_[hash] = CacheEntry{result, now + cache_ttl_};
  return result;
}

}  // namespace tessera::auth
