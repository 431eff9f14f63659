#include "services/admin/admin_handler.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/common/auth/api_keys.h"
#include "services/common/rpc.h"

namespace tessera::admin {
namespace {

absl::StatusOr<std::string> CreateKey(store::ApiKeyStore& keys, const Clock& clock,
                                      absl::BitGenRef gen, const std::string& user, v1::Role role,
                                      const std::string& description, v1::ApiKey* out) {
  store::ApiKeyRecord record;
  const std::string secret = auth::NewSecret(gen);
  record.secret_hash = auth::HashSecret(secret);
  record.key.set_id(auth::NewKeyId(gen));
  record.key.set_user(user);
  record.key.set_role(role);
  record.key.set_description(description);
  *record.key.mutable_created_at() = ToProtoTime(clock.Now());
  if (auto st = keys.CreateKey(record); !st.ok()) return st;
  if (out) *out = record.key;
  return secret;
}

}  // namespace

absl::Status ValidateUserName(const std::string& field, const std::string& user) {
  bool ok = !user.empty() && user.size() <= 64 && absl::ascii_isalnum(user[0]);
  for (char c : user) {
    ok = ok &&
         (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": \"", user,
        "\" is not a user name (1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or "
        "digit)"));
  }
  return absl::OkStatus();
}

AdminHandler::AdminHandler(std::shared_ptr<store::ApiKeyStore> keys,
                           std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<Clock> clock,
                           absl::BitGen gen)
    : keys_(std::move(keys)),
      idem_(std::move(idem)),
      clock_(std::move(clock)),
      gen_(std::move(gen)) {}

absl::Status AdminHandler::CreateApiKey(const auth::Principal& who,
                                        const v1::CreateApiKeyRequest& req,
                                        v1::CreateApiKeyResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireAdmin(who, "creating API keys"));
  TESSERA_RETURN_IF_ERROR(ValidateUserName("user", req.user()));
  v1::Role role = req.role() == v1::ROLE_UNSPECIFIED ? v1::ROLE_USER : req.role();
  if (!v1::Role_IsValid(role)) {
    return absl::InvalidArgumentError(absl::StrCat("role: unknown role ", req.role()));
  }
  if (role == v1::ROLE_SYSTEM && !who.is_system()) {
    return absl::PermissionDeniedError("role: only Tessera's components may create system keys");
  }
  if (req.description().size() > 256) {
    return absl::InvalidArgumentError("description: at most 256 characters");
  }
  return idem_->Run(absl::StrCat("CreateApiKey/", who.user), req.idempotency_key(), req, resp,
                    [&]() -> absl::Status {
                      absl::MutexLock lock(&gen_mu_);
                      auto secret = CreateKey(*keys_, *clock_, gen_, req.user(), role,
                                              req.description(), resp->mutable_key());
                      if (!secret.ok()) return secret.status();
                      resp->set_secret(*secret);
                      return absl::OkStatus();
                    });
}

absl::Status AdminHandler::ListApiKeys(const auth::Principal& who,
                                       const v1::ListApiKeysRequest& req,
                                       v1::ListApiKeysResponse* resp) {
  std::string user = req.user();
  if (!who.is_admin()) {
    if (!user.empty() && user != who.user) {
      return absl::PermissionDeniedError("listing another user's API keys requires an admin key");
    }
    user = who.user;
  }
  auto keys = keys_->ListKeys(user);
  if (!keys.ok()) return keys.status();
  for (auto& k : *keys) *resp->add_keys() = std::move(k);
  return absl::OkStatus();
}

absl::Status AdminHandler::RevokeApiKey(const auth::Principal& who,
                                        const v1::RevokeApiKeyRequest& req,
                                        v1::RevokeApiKeyResponse* resp) {
  if (req.id().empty()) return absl::InvalidArgumentError("id: required");
  if (!who.is_admin()) {
    auto own = keys_->ListKeys(who.user);
    if (!own.ok()) return own.status();
    bool mine = false;
    for (const auto& k : *own) mine = mine || k.id() == req.id();
    if (!mine) return absl::NotFoundError(absl::StrCat("API key ", req.id(), " not found"));
  }
  return idem_->Run(absl::StrCat("RevokeApiKey/", who.user), req.idempotency_key(), req, resp,
                    [&] { return keys_->RevokeKey(req.id()); });
}

absl::Status AdminHandler::WhoAmI(const auth::Principal& who, const v1::WhoAmIRequest&,
                                  v1::WhoAmIResponse* resp) {
  resp->set_user(who.user);
  resp->set_role(who.role);
  return absl::OkStatus();
}

absl::StatusOr<std::string> CreateApiKeyDirect(store::ApiKeyStore& keys, const Clock& clock,
                                               const std::string& user, v1::Role role,
                                               const std::string& description) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("--user", user));
  absl::BitGen gen;
  return CreateKey(keys, clock, gen, user, role, description, nullptr);
}

}  // namespace tessera::admin
