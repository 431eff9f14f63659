#pragma once
// The gRPC adapter of JoinHandler. Join takes no API key (its token is the credential), so it is
// not served through Serve; a successful join is written to the audit log here.

#include "services/admin/join_handler.h"
#include "services/common/rpc.h"
#include "tessera/v1/admin.grpc.pb.h"

namespace tessera::admin {

class JoinService final : public v1::NodeJoin::Service {
 public:
  using Api = v1::NodeJoin;

  JoinService(std::shared_ptr<JoinHandler> handler, std::shared_ptr<auth::Authenticator> auth)
      : handler_(std::move(handler)), auth_(std::move(auth)) {}

  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                    v1::JoinResponse* response) override {
    const absl::Status st = handler_->Join(*request, response);
    if (st.ok() && auth_->audit_log() != nullptr) {
      // Refusals are only logged: anyone may call Join, and a flood must not fill the audit log.
      v1::JoinRequest shown;
      shown.set_node(request->node());
      auth::Principal joined{request->node(), v1::ROLE_NODE, request->node()};
      joined.key_id = response->key_id();
      auth_->audit_log()->Record(joined, TESSERA_RPC_NAME(Join), *context, &shown, st);
    }
    return ToGrpcStatus(st);
  }

  TESSERA_UNARY_RPC(handler_, RenewNodeCertificate)

 private:
  std::shared_ptr<JoinHandler> handler_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::admin
