#pragma once
// The gRPC adapter of NotificationHandler: authenticates, forwards, maps the status.

#include "services/common/rpc.h"
#include "services/notify/notification_handler.h"
#include "tessera/v1/notifications.grpc.pb.h"

namespace tessera::notify {

class NotificationService final : public v1::NotificationService::Service {
 public:
  using Api = v1::NotificationService;

  NotificationService(std::shared_ptr<NotificationHandler> handler,
                      std::shared_ptr<auth::Authenticator> auth)
      : m_(std::move(handler)), auth_(std::move(auth)) {}

  TESSERA_UNARY_RPC(m_, CreateSubscription)
  TESSERA_UNARY_RPC(m_, ListSubscriptions)
  TESSERA_UNARY_RPC(m_, DeleteSubscription)
  TESSERA_UNARY_RPC(m_, ListNotifications)

 private:
  std::shared_ptr<NotificationHandler> m_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::notify
