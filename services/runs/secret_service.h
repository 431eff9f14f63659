#pragma once
// The gRPC adapter of SecretManager: authenticates, forwards, maps the status.

#include "services/common/rpc.h"
#include "services/runs/secret_manager.h"
#include "tessera/v1/secrets.grpc.pb.h"

namespace tessera::runs {

class SecretService final : public v1::SecretService::Service {
 public:
  using Api = v1::SecretService;

  SecretService(std::shared_ptr<SecretManager> manager, std::shared_ptr<auth::Authenticator> auth)
      : m_(std::move(manager)), auth_(std::move(auth)) {}

  TESSERA_UNARY_RPC(m_, CreateSecret)
  TESSERA_UNARY_RPC(m_, ListSecrets)
  TESSERA_UNARY_RPC(m_, DeleteSecret)
  TESSERA_UNARY_RPC(m_, GetRunSecrets)

 private:
  std::shared_ptr<SecretManager> m_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::runs
