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

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/auth/api_keys.h"
#include "services/common/auth/audit_log.h"
#include "services/common/auth/others_run_reads.h"
#include "services/common/auth/peer_identity.h"
#include "services/common/auth/rpc_roles.h"
#include "services/store/traffic_class.h"
#include "transport/grpc_status.h"

namespace tessera {

// "tessera.v1.RunService/GetRun" from the generated service's name and the method's.
inline std::string RpcName(const char* service, const char* method) {
  return absl::StrCat(service, "/", method);
}

// A call's admission: its caller authenticated, checked against the role table and charged a
// call of their rate, and the traffic class its reads are; then, once the call is over, its
// answer (audited when the table says so). Serve does all of it around a handler; a call served
// on the async API (async_writer.h) holds one between its steps.
class AdmittedCall {
 public:
  // `request` (optional) is what the audit log records of an audited call (rpc_roles.h): its
  // target and its fields; it must outlive the AdmittedCall. Refused: see refused().
  AdmittedCall(auth::Authenticator& authenticator, const grpc::ServerContextBase& context,
               std::string method, const google::protobuf::Message* request = nullptr)
      : authenticator_(&authenticator),
        context_(&context),
        method_(std::move(method)),
        request_(request),
        rule_(auth::FindRpcRule(method_)) {
    auto who = authenticator.Authenticate(context);
    if (!who.ok()) {
      refused_ = who.status();
      return;
    }
    who_ = *std::move(who);
    if (auto allowed = auth::CheckRpcRole(method_, rule_, *who_); !allowed.ok()) {
      refused_ = allowed;
      return;
    }
    // Before the handler reads anything: one user's flood of calls costs the database nothing.
    refused_ = authenticator.ChargeCall(*who_);
    // A person's call may not use the connections kept for the control plane, nor may a
    // service's call made for a person (the scheduler reading runs for `mcli util`).
    traffic_ = who_->is_system() && !auth::ForAPerson(context) ? store::TrafficClass::kControl
                                                               : store::TrafficClass::kUser;
  }

  // Why the call may not go on (OK: it may).
  const absl::Status& refused() const { return refused_; }
  // The caller (when authenticated).
  const auth::Principal& who() const { return *who_; }
  // What the call's reads are (a store::TrafficScope of it around them).
  store::TrafficClass traffic() const { return traffic_; }

  // While it lives, the handler's reads of other users' runs on this thread are noted for the
  // audit log (others_run_reads.h): around every step of the handler that may let one through.
  [[nodiscard]] auth::OthersRunReads::Listening ListenForRunReads() {
    return auth::OthersRunReads::Listening(run_reads_);
  }

  // What the caller is told of `outcome`, audited when the call is (not when unauthenticated).
  grpc::Status Answer(const absl::Status& outcome) const {
    grpc::Status answered = ToGrpcStatus(outcome);
    auth::AuditLog* audit = authenticator_->audit_log();
    if (who_ && audit != nullptr && rule_ != nullptr &&
        auth::Audited(*rule_, *who_, run_reads_.noted())) {
      audit->Record(*who_, method_, *context_, request_, FromGrpcStatus(answered));
    }
    return answered;
  }

 private:
  auth::Authenticator* authenticator_;
  const grpc::ServerContextBase* context_;
  std::string method_;
  const google::protobuf::Message* request_;
  const auth::RpcRule* rule_;
  std::optional<auth::Principal> who_;
  absl::Status refused_;
  store::TrafficClass traffic_ = store::TrafficClass::kUser;
  auth::OthersRunReads run_reads_;
};

// Runs `fn(who)` for an admitted call (AdmittedCall) and answers with its status.
template <typename Fn>
grpc::Status Serve(auth::Authenticator& authenticator, grpc::ServerContext* context,
                   const std::string& method, Fn&& fn,
                   const google::protobuf::Message* request = nullptr) {
  AdmittedCall call(authenticator, *context, method, request);
  if (!call.refused().ok()) {
    // Unauthenticated calls are not audited (nobody to name), as before any check.
    return call.Answer(call.refused());
  }
  store::TrafficScope traffic(call.traffic());
  const auto outcome = [&] {
    auto listening = call.ListenForRunReads();
    return fn(call.who());
  }();
  return call.Answer(outcome);
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
