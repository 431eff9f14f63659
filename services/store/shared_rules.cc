// What the store implementations must agree on beyond filters (filters.cc): which join token may
// be used, which audit records a query's action names, and how a heartbeat summary meets a node.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "services/store/audit_store.h"
#include "services/store/join_token_store.h"
#include "services/store/node_store.h"

namespace tessera::store {

void KeepLaterHeartbeat(v1::Node& node, absl::Time last_heartbeat, absl::Time lease_expires) {
  if (!node.has_last_heartbeat_at() || FromProtoTime(node.last_heartbeat_at()) < last_heartbeat) {
    *node.mutable_last_heartbeat_at() = ToProtoTime(last_heartbeat);
  }
  if (!node.has_lease_expires_at() || FromProtoTime(node.lease_expires_at()) < lease_expires) {
    *node.mutable_lease_expires_at() = ToProtoTime(lease_expires);
  }
}

bool AuditActionMatches(const std::string& action, const std::string& wanted) {
  if (wanted.empty() || action == wanted) return true;
  return wanted.find('/') == std::string::npos && absl::EndsWith(action, absl::StrCat("/", wanted));
}

absl::Status CheckJoinTokenUsable(const v1::JoinToken& token, std::string_view node,
                                  absl::Time now) {
  if (token.revoked()) {
    return absl::PermissionDeniedError(absl::StrCat("join token ", token.id(), " was revoked"));
  }
  if (token.has_used_at()) {
    return absl::PermissionDeniedError(
        absl::StrCat("join token ", token.id(), " was already used, at ",
                     absl::FormatTime(FromProtoTime(token.used_at()), absl::UTCTimeZone()),
                     ": a token joins one node once; ask an admin for a new one"));
  }
  if (now >= FromProtoTime(token.expires_at())) {
    return absl::PermissionDeniedError(
        absl::StrCat("join token ", token.id(), " expired at ",
                     absl::FormatTime(FromProtoTime(token.expires_at()), absl::UTCTimeZone())));
  }
  if (token.node() != node) {
    return absl::PermissionDeniedError(absl::StrCat("join token ", token.id(), " is for node \"",
                                                    token.node(), "\", not \"", std::string(node),
                                                    "\""));
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::JoinToken> LastUsedJoinToken(const std::vector<v1::JoinToken>& tokens,
                                                std::string_view node) {
  const v1::JoinToken* last = nullptr;
  for (const v1::JoinToken& t : tokens) {
    if (t.node() != node || !t.has_used_at()) continue;
    if (last == nullptr || FromProtoTime(t.used_at()) > FromProtoTime(last->used_at())) last = &t;
  }
  if (last == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("node \"", std::string(node), "\" joined with no join token"));
  }
  return *last;
}

}  // namespace tessera::store
