#include "services/admin/join_handler.h"

#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "proto/policy/node_terms.h"
#include "services/admin/admin_handler.h"
#include "services/common/auth/api_keys.h"

namespace tessera::admin {

JoinHandler::JoinHandler(std::shared_ptr<store::JoinTokenStore> tokens,
                         std::shared_ptr<const tls::CertificateAuthority> ca,
                         std::shared_ptr<Clock> clock, JoinOptions options)
    : tokens_(std::move(tokens)), ca_(std::move(ca)), clock_(std::move(clock)), options_(options) {}

absl::Status JoinHandler::Join(const v1::JoinRequest& req, v1::JoinResponse* resp) {
  TESSERA_RETURN_IF_ERROR(ValidateUserName("node", req.node()));
  if (!absl::StartsWith(req.token(), "tjt_") || req.token().size() > 128) {
    return absl::UnauthenticatedError("token: not a join token (they start with tjt_)");
  }
  const absl::Time now = clock_->Now();
  // The token is checked before anything is done for the caller: a stranger without a usable
  // token makes the CA sign nothing.
  const std::string token_hash = auth::HashSecret(req.token());
  TESSERA_ASSIGN_OR_RETURN(const v1::JoinToken found, tokens_->FindJoinToken(token_hash));
  TESSERA_RETURN_IF_ERROR(store::CheckJoinTokenUsable(found, req.node(), now));
  // The certificate is made before the token is used: a bad request does not spend the token,
  // and a token is never spent without its credentials being answered. (Redeeming checks the
  // token again, in the transaction that uses it.)
  std::optional<tls::IssuedCertificate> certificate;
  if (ca_ != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(certificate, ca_->SignNodeCertificate(req.csr_pem(), req.node(), now,
                                                                   options_.certificate_validity));
  }
  store::ApiKeyRecord key;
  const std::string secret = auth::NewSecret();
  key.secret_hash = auth::HashSecret(secret);
  key.key.set_id(auth::NewKeyId());
  key.key.set_user(req.node());
  key.key.set_role(v1::ROLE_NODE);
  key.key.set_node(req.node());
  key.key.set_description("joined with a join token");
  // The token's terms go with the key: the scheduler holds the node to the key it calls with.
  if (HasNodeTerms(found.terms())) *key.key.mutable_node_terms() = found.terms();
  *key.key.mutable_created_at() = ToProtoTime(now);
  auto token = tokens_->RedeemJoinToken(token_hash, req.node(), now, key);
  if (!token.ok()) {
    spdlog::warn("join: node {} was refused: {}", req.node(), token.status().ToString());
    return token.status();
  }
  resp->set_node(req.node());
  resp->set_key_id(key.key.id());
  resp->set_api_key(secret);
  if (certificate) {
    resp->set_certificate_pem(certificate->pem);
    *resp->mutable_certificate_expires_at() = ToProtoTime(certificate->not_after);
    resp->set_ca_pem(ca_->ca_pem());
  }
  spdlog::info("join: node {} joined with token {} (key {}{})", req.node(), token->id(),
               key.key.id(), certificate ? ", certificate signed" : "");
  return absl::OkStatus();
}

absl::Status JoinHandler::RenewNodeCertificate(const auth::Principal& who,
                                               const v1::RenewNodeCertificateRequest& req,
                                               v1::RenewNodeCertificateResponse* resp) {
  if (!who.is_node()) {
    return absl::PermissionDeniedError("renewing a node certificate takes the node's own key");
  }
  if (ca_ == nullptr) {
    return absl::FailedPreconditionError(
        "this control plane does not sign certificates (it has no --tls-ca-key): the operator "
        "renews the node's certificate");
  }
  TESSERA_ASSIGN_OR_RETURN(auto certificate,
                           ca_->SignNodeCertificate(req.csr_pem(), who.node, clock_->Now(),
                                                    options_.certificate_validity));
  resp->set_certificate_pem(certificate.pem);
  *resp->mutable_certificate_expires_at() = ToProtoTime(certificate.not_after);
  spdlog::info("join: renewed the certificate of node {} until {}", who.node,
               absl::FormatTime(certificate.not_after));
  return absl::OkStatus();
}

}  // namespace tessera::admin
