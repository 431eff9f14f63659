#pragma once
// The adapters' one helper: authenticate the caller, run the handler, map its status.
//
// A unary RPC whose handler method has the same name and takes (who, request, response) is one
// line in the adapter (which keeps its Authenticator in `auth_`):
//
//   TESSERA_UNARY_RPC(handler_, GetRun)
//
// Anything else (streams, a method the adapter answers itself) calls Serve:
//
//   grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::StatusRequest* req,
//                          v1::StatusResponse* resp) override {
//     return Serve(*auth_, ctx, [&](const auth::Principal& who) { ... });
//   }

#include <grpcpp/server_context.h>

#include "absl/strings/str_cat.h"
#include "services/common/auth/api_keys.h"
#include "services/common/grpc_status.h"
#include "services/store/traffic_class.h"

namespace tessera {

template <typename Fn>
grpc::Status Serve(auth::Authenticator& authenticator, grpc::ServerContext* context, Fn&& fn) {
  auto who = authenticator.Authenticate(*context);
  if (!who.ok()) return ToGrpcStatus(who.status());
  // A person's call may not use the connections kept for the control plane.
  store::TrafficScope traffic(who->is_system() ? store::TrafficClass::kControl
                                               : store::TrafficClass::kUser);
  return ToGrpcStatus(fn(*who));
}

// PERMISSION_DENIED unless the caller is an admin (or a Tessera component).
inline absl::Status RequireAdmin(const auth::Principal& who, const char* what) {
  if (who.is_admin()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " requires an admin API key; ", who.user, " is not an admin"));
}

// PERMISSION_DENIED unless the caller is one of Tessera's own components.
inline absl::Status RequireSystem(const auth::Principal& who, const char* what) {
  if (who.is_system()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " is internal to Tessera and needs a system API key"));
}

}  // namespace tessera

// Declares the override of the unary RPC `Method` (tessera::v1::MethodRequest ->
// tessera::v1::MethodResponse) that authenticates the caller with the adapter's `auth_` and
// forwards to `handler->Method(who, *request, response)`. `handler` is the adapter's member that
// points at the handler.
#define TESSERA_UNARY_RPC(handler, Method)                                                \
  ::grpc::Status Method(::grpc::ServerContext* context,                                   \
                        const ::tessera::v1::Method##Request* request,                    \
                        ::tessera::v1::Method##Response* response) override {             \
    return ::tessera::Serve(*auth_, context, [&](const ::tessera::auth::Principal& who) { \
      return (handler)->Method(who, *request, response);                                  \
    });                                                                                   \
  }
