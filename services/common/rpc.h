#pragma once
// The adapters' one helper: authenticate the caller, run the handler, map its status.
//
//   grpc::Status GetRun(grpc::ServerContext* ctx, const GetRunRequest* req,
//                       GetRunResponse* resp) override {
//     return Serve(*auth_, ctx, [&](const auth::Principal& who) {
//       return handler_->GetRun(who, *req, resp);
//     });
//   }

#include <grpcpp/server_context.h>

#include "absl/strings/str_cat.h"
#include "services/common/auth/api_keys.h"
#include "services/common/grpc_status.h"

namespace tessera {

template <typename Fn>
grpc::Status Serve(auth::Authenticator& authenticator, grpc::ServerContext* context, Fn&& fn) {
  auto who = authenticator.Authenticate(*context);
  if (!who.ok()) return ToGrpcStatus(who.status());
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
