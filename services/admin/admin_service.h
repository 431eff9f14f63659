#pragma once
// The gRPC adapter of AdminHandler.

#include "services/admin/admin_handler.h"
#include "services/common/rpc.h"

namespace tessera::admin {

class AdminService final : public v1::AdminService::Service {
 public:
  AdminService(std::shared_ptr<AdminHandler> handler, std::shared_ptr<auth::Authenticator> auth)
      : handler_(std::move(handler)), auth_(std::move(auth)) {}

  grpc::Status CreateApiKey(grpc::ServerContext* ctx, const v1::CreateApiKeyRequest* req,
                            v1::CreateApiKeyResponse* resp) override {
    return Serve(*auth_, ctx, [&](const auth::Principal& who) {
      return handler_->CreateApiKey(who, *req, resp);
    });
  }
  grpc::Status ListApiKeys(grpc::ServerContext* ctx, const v1::ListApiKeysRequest* req,
                           v1::ListApiKeysResponse* resp) override {
    return Serve(*auth_, ctx, [&](const auth::Principal& who) {
      return handler_->ListApiKeys(who, *req, resp);
    });
  }
  grpc::Status RevokeApiKey(grpc::ServerContext* ctx, const v1::RevokeApiKeyRequest* req,
                            v1::RevokeApiKeyResponse* resp) override {
    return Serve(*auth_, ctx, [&](const auth::Principal& who) {
      return handler_->RevokeApiKey(who, *req, resp);
    });
  }
  grpc::Status WhoAmI(grpc::ServerContext* ctx, const v1::WhoAmIRequest*,
                      v1::WhoAmIResponse* resp) override {
    return Serve(*auth_, ctx,
                 [&](const auth::Principal& who) { return handler_->WhoAmI(who, resp); });
  }

 private:
  std::shared_ptr<AdminHandler> handler_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::admin
