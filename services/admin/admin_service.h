#pragma once
// The gRPC adapter of AdminHandler.

#include "services/admin/admin_handler.h"
#include "services/common/rpc.h"
#include "tessera/v1/admin.grpc.pb.h"

namespace tessera::admin {

class AdminService final : public v1::AdminService::Service {
 public:
  using Api = v1::AdminService;

  AdminService(std::shared_ptr<AdminHandler> handler, std::shared_ptr<auth::Authenticator> auth)
      : handler_(std::move(handler)), auth_(std::move(auth)) {}

  TESSERA_UNARY_RPC(handler_, CreateApiKey)
  TESSERA_UNARY_RPC(handler_, ListApiKeys)
  TESSERA_UNARY_RPC(handler_, RevokeApiKey)
  TESSERA_UNARY_RPC(handler_, WhoAmI)
  TESSERA_UNARY_RPC(handler_, CreateJoinToken)
  TESSERA_UNARY_RPC(handler_, ListJoinTokens)
  TESSERA_UNARY_RPC(handler_, RevokeJoinToken)
  TESSERA_UNARY_RPC(handler_, ListAuditRecords)

 private:
  std::shared_ptr<AdminHandler> handler_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::admin
