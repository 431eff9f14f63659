#include "services/admin/admin_handler.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "proto/policy/node_terms.h"
#include "services/common/auth/api_keys.h"
#include "services/common/node_labels.h"
#include "services/common/rpc.h"

namespace tessera::admin {
namespace {

constexpr int64_t kMinKeyLifetimeSeconds = 60;

// The request's fields checked; the role with its default.
absl::StatusOr<v1::Role> ValidateKeyRequest(const v1::CreateApiKeyRequest& req) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("user", req.user()));
  const v1::Role role = req.role() == v1::ROLE_UNSPECIFIED ? v1::ROLE_USER : req.role();
  if (!v1::Role_IsValid(role)) {
    return absl::InvalidArgumentError(absl::StrCat("role: unknown role ", req.role()));
  }
  if (role == v1::ROLE_NODE) {
    if (req.node().empty()) {
      return absl::InvalidArgumentError("node: required for a node key (the node it acts as)");
    }
    TESSERA_RETURN_IF_ERROR(ValidateUserName("node", req.node()));
    TESSERA_RETURN_IF_ERROR(ValidateNodeTerms("node_terms", req.node_terms()));
  } else if (!req.node().empty()) {
    return absl::InvalidArgumentError("node: only a node key is bound to a node");
  } else if (HasNodeTerms(req.node_terms())) {
    return absl::InvalidArgumentError("node_terms: only a node key has terms (what its node is)");
  }
  if (req.description().size() > 256) {
    return absl::InvalidArgumentError("description: at most 256 characters");
  }
  if (req.expires_in_seconds() < 0 ||
      (req.expires_in_seconds() > 0 && req.expires_in_seconds() < kMinKeyLifetimeSeconds)) {
    return absl::InvalidArgumentError(absl::StrCat("expires_in_seconds: at least ",
                                                   kMinKeyLifetimeSeconds, " (or 0: no expiry)"));
  }
  return role;
}

absl::StatusOr<std::string> CreateKey(store::ApiKeyStore& keys, const Clock& clock,
                                      const v1::CreateApiKeyRequest& req, v1::Role role,
                                      std::string id, v1::ApiKey* out) {
  store::ApiKeyRecord record;
  const std::string secret = auth::NewSecret();
  record.secret_hash = auth::HashSecret(secret);
  record.key.set_id(std::move(id));
  record.key.set_user(req.user());
  record.key.set_role(role);
  record.key.set_description(req.description());
  record.key.set_node(req.node());
  if (HasNodeTerms(req.node_terms())) *record.key.mutable_node_terms() = req.node_terms();
  const absl::Time now = clock.Now();
  *record.key.mutable_created_at() = ToProtoTime(now);
  if (req.expires_in_seconds() > 0) {
    *record.key.mutable_expires_at() = ToProtoTime(now + absl::Seconds(req.expires_in_seconds()));
  }
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

absl::Status ValidateNodeTerms(const std::string& field, const v1::NodeTerms& terms) {
  for (const auto& [name, value] :
       {std::pair{"cluster", &terms.cluster()}, std::pair{"gpu_type", &terms.gpu_type()}}) {
    if (value->size() > 63) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".", name, ": at most 63 characters"));
    }
  }
  if (terms.max_gpus() < 0 || terms.max_gpus() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".max_gpus: from 0 (no limit but 64) to 64"));
  }
  if (terms.labels_size() > 32) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".labels: at most 32"));
  }
  return ValidateNodeLabels(terms.labels(), field + ".labels");
}

AdminHandler::AdminHandler(std::shared_ptr<store::ApiKeyStore> keys,
                           std::shared_ptr<store::JoinTokenStore> join_tokens,
                           std::shared_ptr<store::AuditStore> audit,
                           std::shared_ptr<IdempotentCalls> idem, std::shared_ptr<Clock> clock)
    : keys_(std::move(keys)),
      join_tokens_(std::move(join_tokens)),
      audit_(std::move(audit)),
      idem_(std::move(idem)),
      clock_(std::move(clock)) {}

absl::Status AdminHandler::CreateApiKey(const auth::Principal& who,
                                        const v1::CreateApiKeyRequest& req,
                                        v1::CreateApiKeyResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireAdmin(who, "creating API keys"));
  TESSERA_ASSIGN_OR_RETURN(const v1::Role role, ValidateKeyRequest(req));
  if (role == v1::ROLE_SYSTEM) {
    return absl::PermissionDeniedError(
        "role: system keys belong to Tessera's services, which make their own; give a person "
        "user, operator or admin, and a worker a node key");
  }
  const std::string id = req.idempotency_key().empty()
                             ? auth::NewKeyId()
                             : auth::KeyIdForRequest(who.user, req.idempotency_key());
  TESSERA_ASSIGN_OR_RETURN(*resp->mutable_secret(),
                           CreateShownOnce("API key", req.idempotency_key(), id, [&] {
                             return CreateKey(*keys_, *clock_, req, role, id, resp->mutable_key());
                           }));
  return absl::OkStatus();
}

absl::StatusOr<std::string> CreateShownOnce(
    const std::string& what, const std::string& idempotency_key, const std::string& id,
    const std::function<absl::StatusOr<std::string>()>& make) {
  auto secret = make();
  if (absl::IsAlreadyExists(secret.status()) && !idempotency_key.empty()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "this request (idempotency key ", idempotency_key, ") already made ", what, " ", id,
        "; its secret was shown once and is not kept: revoke it and make another"));
  }
  return secret;
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
  resp->set_node(who.node);
  return absl::OkStatus();
}

absl::StatusOr<std::string> CreateApiKeyDirect(store::ApiKeyStore& keys, const Clock& clock,
                                               const v1::CreateApiKeyRequest& request) {
  TESSERA_ASSIGN_OR_RETURN(const v1::Role role, ValidateKeyRequest(request));
  return CreateKey(keys, clock, request, role, auth::NewKeyId(), nullptr);
}

}  // namespace tessera::admin
