#pragma once
// The gRPC adapter of CordonHandler.

#include "base/status_macros.h"
#include "services/common/auth/stream_guard.h"
#include "services/common/rpc.h"
#include "services/cordon/cordon_handler.h"

namespace tessera::cordon {

class CordonService final : public v1::CordonService::Service {
 public:
  using Api = v1::CordonService;

  CordonService(std::shared_ptr<CordonHandler> handler, std::shared_ptr<auth::Authenticator> auth,
                absl::Duration watch_poll_interval = absl::Milliseconds(200))
      : h_(std::move(handler)), auth_(std::move(auth)), poll_(watch_poll_interval) {}

  TESSERA_UNARY_RPC(h_, CordonNode)
  TESSERA_UNARY_RPC(h_, UncordonNode)
  TESSERA_UNARY_RPC(h_, DrainNode)
  TESSERA_UNARY_RPC(h_, ListNodeEvents)

  grpc::Status WatchNodeEvents(grpc::ServerContext* ctx, const v1::WatchNodeEventsRequest* req,
                               grpc::ServerWriter<v1::NodeEvent>* writer) override {
    return Serve(*auth_, ctx, TESSERA_RPC_NAME(WatchNodeEvents),
                 [&](const auth::Principal& who) -> absl::Status {
                   TESSERA_ASSIGN_OR_RETURN(
                       auto guard,
                       auth::StreamGuard::Open(*auth_, *ctx, who,
                                               auth::StreamGuard::Lifetime::kReconnecting));
                   return guard.Outcome(h_->WatchNodeEvents(
                       who, *req, [&](const v1::NodeEvent& e) { return writer->Write(e); },
                       [&] { return guard.Done(); }, poll_));
                 });
  }

 private:
  std::shared_ptr<CordonHandler> h_;
  std::shared_ptr<auth::Authenticator> auth_;
  absl::Duration poll_;
};

}  // namespace tessera::cordon
