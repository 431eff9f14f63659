// Join tokens and the audit log: the admins' part of AdminHandler beyond API keys.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/admin/admin_handler.h"
#include "services/common/auth/api_keys.h"
#include "services/common/rpc.h"

namespace tessera::admin {
namespace {

constexpr int64_t kMinTokenLifetimeSeconds = 60;
constexpr int64_t kMaxTokenLifetimeSeconds = 7 * 86400;
constexpr int64_t kDefaultTokenLifetimeSeconds = 3600;

absl::StatusOr<std::string> MakeJoinToken(store::JoinTokenStore& tokens, const Clock& clock,
                                          const v1::CreateJoinTokenRequest& req,
                                          const std::string& created_by, std::string id,
                                          v1::JoinToken* out) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("node", req.node()));
  if (req.description().size() > 256) {
    return absl::InvalidArgumentError("description: at most 256 characters");
  }
  TESSERA_RETURN_IF_ERROR(ValidateNodeTerms("terms", req.terms()));
  const int64_t lifetime =
      req.expires_in_seconds() == 0 ? kDefaultTokenLifetimeSeconds : req.expires_in_seconds();
  if (lifetime < kMinTokenLifetimeSeconds || lifetime > kMaxTokenLifetimeSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expires_in_seconds: from ", kMinTokenLifetimeSeconds, " to ", kMaxTokenLifetimeSeconds,
        " (7 days); default ", kDefaultTokenLifetimeSeconds));
  }
  store::JoinTokenRecord record;
  const std::string secret = auth::NewJoinTokenSecret();
  record.secret_hash = auth::HashSecret(secret);
  record.token.set_id(std::move(id));
  record.token.set_node(req.node());
  record.token.set_created_by(created_by);
  record.token.set_description(req.description());
  *record.token.mutable_terms() = req.terms();
  const absl::Time now = clock.Now();
  *record.token.mutable_created_at() = ToProtoTime(now);
  *record.token.mutable_expires_at() = ToProtoTime(now + absl::Seconds(lifetime));
  TESSERA_RETURN_IF_ERROR(tokens.CreateJoinToken(record));
  if (out != nullptr) *out = record.token;
  return secret;
}

}  // namespace

absl::Status AdminHandler::CreateJoinToken(const auth::Principal& who,
                                           const v1::CreateJoinTokenRequest& req,
                                           v1::CreateJoinTokenResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireAdmin(who, "creating join tokens"));
  const std::string id =
      req.idempotency_key().empty()
          ? auth::NewJoinTokenId()
          : "jt-" + auth::KeyIdForRequest("join/" + who.user, req.idempotency_key()).substr(4);
  TESSERA_ASSIGN_OR_RETURN(
      *resp->mutable_secret(), CreateShownOnce("join token", req.idempotency_key(), id, [&] {
        return MakeJoinToken(*join_tokens_, *clock_, req, who.user, id, resp->mutable_token());
      }));
  return absl::OkStatus();
}

absl::Status AdminHandler::ListJoinTokens(const auth::Principal& who,
                                          const v1::ListJoinTokensRequest&,
                                          v1::ListJoinTokensResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireAdmin(who, "listing join tokens"));
  TESSERA_ASSIGN_OR_RETURN(auto tokens, join_tokens_->ListJoinTokens());
  for (auto& t : tokens) *resp->add_tokens() = std::move(t);
  return absl::OkStatus();
}

absl::Status AdminHandler::RevokeJoinToken(const auth::Principal& who,
                                           const v1::RevokeJoinTokenRequest& req,
                                           v1::RevokeJoinTokenResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireAdmin(who, "revoking join tokens"));
  if (req.id().empty()) return absl::InvalidArgumentError("id: required");
  return idem_->Run(absl::StrCat("RevokeJoinToken/", who.user), req.idempotency_key(), req, resp,
                    [&] { return join_tokens_->RevokeJoinToken(req.id()); });
}

absl::Status AdminHandler::ListAuditRecords(const auth::Principal& who,
                                            const v1::ListAuditRecordsRequest& req,
                                            v1::ListAuditRecordsResponse* resp) {
  TESSERA_RETURN_IF_ERROR(RequireAdmin(who, "reading the audit log"));
  if (req.limit() < 0 || req.limit() > 1000) {
    return absl::InvalidArgumentError("limit: from 0 to 1000 (0: 100)");
  }
  if (req.before_id() < 0) return absl::InvalidArgumentError("before_id: must not be negative");
  store::AuditQuery q;
  if (req.has_since()) q.since = FromProtoTime(req.since());
  q.actor = req.actor();
  q.action = req.action();
  q.target = req.target();
  q.limit = req.limit() == 0 ? 100 : req.limit();
  q.before_id = req.before_id();
  TESSERA_ASSIGN_OR_RETURN(auto records, audit_->ListAudit(q));
  for (auto& r : records) *resp->add_records() = std::move(r);
  return absl::OkStatus();
}

absl::StatusOr<std::string> CreateJoinTokenDirect(store::JoinTokenStore& tokens, const Clock& clock,
                                                  const v1::CreateJoinTokenRequest& request,
                                                  const std::string& created_by) {
  return MakeJoinToken(tokens, clock, request, created_by, auth::NewJoinTokenId(), nullptr);
}

}  // namespace tessera::admin
