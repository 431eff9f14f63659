#pragma once
// The adapters' one helper: authenticate the caller, run the handler, map its status.
//
// Every call is first checked against the role table (auth/rpc_roles.h) by its full method name.
// A unary RPC whose handler method has the same name and takes (who, request, response) is one
// line in the adapter (which keeps its Authenticator in `auth_` and names its generated service
// `Api`, e.g. `using Api = v1::RunService;`):
//
//   TESSERA_UNARY_RPC(handler_, GetRun)
//
// Anything else (streams, a method the adapter answers itself) calls Serve:
//
//   grpc::Status GetStatus(grpc::ServerContext* ctx, const v1::StatusRequest* req,
//                          v1::StatusResponse* resp) override {
//     return Serve(*auth_, ctx, TESSERA_RPC_NAME(GetStatus), [&](const auth::Principal& who) {
//       ...
//     });
//   }

#include <grpcpp/server_context.h>

#include "absl/strings/str_cat.h"
#include "services/common/auth/api_keys.h"
#include "services/common/auth/audit_log.h"
#include "services/common/auth/peer_identity.h"
#include "services/common/auth/rpc_roles.h"
#include "services/common/grpc_status.h"
#include "services/store/traffic_class.h"

namespace tessera {

// "tessera.v1.RunService/GetRun" from the generated service's name and the method's.
inline std::string RpcName(const char* service, const char* method) {
  return absl::StrCat(service, "/", method);
}

// `request` (optional) is what the audit log records of an audited call (rpc_roles.h): its
// target and its fields. What it records of the outcome is what the caller was told.
template <typename Fn>
grpc::Status Serve(auth::Authenticator& authenticator, grpc::ServerContext* context,
                   const std::string& method, Fn&& fn,
                   const google::protobuf::Message* request = nullptr) {
  auto who = authenticator.Authenticate(*context);
  if (!who.ok()) return ToGrpcStatus(who.status());
  const auth::RpcRule* rule = auth::FindRpcRule(method);
  auto answer = [&](const absl::Status& outcome) {
    grpc::Status answered = ToGrpcStatus(outcome);
    auth::AuditLog* audit = authenticator.audit_log();
    if (audit != nullptr && rule != nullptr && auth::Audited(*rule, *who)) {
      audit->Record(*who, method, *context, request, FromGrpcStatus(answered));
    }
    return answered;
  };
  if (auto allowed = auth::CheckRpcRole(method, rule, *who); !allowed.ok()) return answer(allowed);
  // Before the handler reads anything: one user's flood of calls costs the database nothing.
  if (auto charged = authenticator.ChargeCall(*who); !charged.ok()) return answer(charged);
  // A person's call may not use the connections kept for the control plane, nor may a service's
  // call made for a person (the scheduler reading runs for `mcli util`).
  store::TrafficScope traffic(who->is_system() && !auth::ForAPerson(*context)
                                  ? store::TrafficClass::kControl
                                  : store::TrafficClass::kUser);
  return answer(fn(*who));
}

// PERMISSION_DENIED unless the caller is an admin.
inline absl::Status RequireAdmin(const auth::Principal& who, const char* what) {
  if (who.is_admin()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " requires an admin API key; ", who.user, " is not an admin"));
}

// PERMISSION_DENIED unless the caller may operate nodes (an operator, an admin, or a Tessera
// service acting for them).
inline absl::Status RequireOperator(const auth::Principal& who, const char* what) {
  if (who.may_operate_nodes()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " requires an operator or admin API key; ", who.user, " is neither"));
}

// PERMISSION_DENIED unless the caller is one of Tessera's own services.
inline absl::Status RequireSystem(const auth::Principal& who, const char* what) {
  if (who.is_system()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " is internal to Tessera and needs a system API key"));
}

}  // namespace tessera

// The full name of the adapter's method `Method` (the adapter declares `using Api = ...`).
#define TESSERA_RPC_NAME(Method) ::tessera::RpcName(Api::service_full_name(), #Method)

// Declares the override of the unary RPC `Method` (tessera::v1::MethodRequest ->
// tessera::v1::MethodResponse) that authenticates the caller with the adapter's `auth_` and
// forwards to `handler->Method(who, *request, response)`. `handler` is the adapter's member that
// points at the handler.
#define TESSERA_UNARY_RPC(handler, Method)                                    \
  ::grpc::Status Method(::grpc::ServerContext* context,                       \
                        const ::tessera::v1::Method##Request* request,        \
                        ::tessera::v1::Method##Response* response) override { \
    return ::tessera::Serve(                                                  \
        *auth_, context, TESSERA_RPC_NAME(Method),                            \
        [&](const ::tessera::auth::Principal& who) {                          \
          return (handler)->Method(who, *request, response);                  \
        },                                                                    \
        request);                                                             \
  }
